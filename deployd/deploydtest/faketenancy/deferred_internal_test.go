package faketenancy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDeferred(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	good := `{"why":"hold","owner":"alice","reason":"demo at 3","until":"2026-12-04T15:00:00Z","sha":"` + sha + `","serial":4,"since":"2026-12-04T13:00:00Z","prepared":true,"later":1}`
	tests := []struct {
		name, in, field string
	}{
		{"a hold, with a field the fake does not know", good, ""},
		{"absent", ``, ""},
		{"null", `null`, ""},
		{"not an object", `[]`, "deferred"},
		{"bad why", strings.Replace(good, `"hold"`, `"lunch"`, 1), "deferred.why"},
		{"bad sha", strings.Replace(good, sha, "abc", 1), "deferred.sha"},
		{"no serial", strings.Replace(good, `"serial":4,`, "", 1), "deferred.serial"},
		{"no since", strings.Replace(good, `,"since":"2026-12-04T13:00:00Z"`, "", 1), "deferred.since"},
		{"bad until", strings.Replace(good, "2026-12-04T15:00:00Z", "soon", 1), "deferred.until"},
		{"long reason", strings.Replace(good, "demo at 3", strings.Repeat("x", 201), 1), "deferred.reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := parseDeferred(json.RawMessage(tt.in))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tt.in == good && (d == nil || d.Owner != "alice" || !d.Until.Equal(time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)) || !d.Prepared) {
					t.Fatalf("decoded %+v", d)
				}
				return
			}
			var fe *fieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Error(), tt.field) {
				t.Fatalf("want a refusal of %s, got %v", tt.field, err)
			}
		})
	}
}
