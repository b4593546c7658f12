package tenancy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/tenancy"
)

// TestCheckinDeferred: the deferred object travels as docs/PROTOCOL.md says, and one
// the agent must not send is refused naming its field.
func TestCheckinDeferred(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	at := time.Date(2026, 12, 4, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name    string
		d       *tenancy.Deferred
		want    string // "" means no "deferred" key
		wantErr string
	}{
		{name: "none"},
		{name: "hold", d: &tenancy.Deferred{Why: "hold", Owner: "alice", Reason: "demo at 3", Until: at.Add(2 * time.Hour),
			SHA: sha, Serial: 4, Since: at, Prepared: true},
			want: `{"why":"hold","owner":"alice","reason":"demo at 3","until":"2026-12-04T14:00:00Z","sha":"` + sha + `","serial":4,"since":"2026-12-04T12:00:00Z","prepared":true}`},
		{name: "window", d: &tenancy.Deferred{Why: "window", Until: at, SHA: sha, Serial: 1, Since: at},
			want: `{"why":"window","until":"2026-12-04T12:00:00Z","sha":"` + sha + `","serial":1,"since":"2026-12-04T12:00:00Z","prepared":false}`},
		{name: "a long reason is cut", d: &tenancy.Deferred{Why: "hold", Owner: "a", Reason: strings.Repeat("é", 150), SHA: sha, Serial: 1, Since: at},
			want: `{"why":"hold","owner":"a","reason":"` + strings.Repeat("é", 100) + `","sha":"` + sha + `","serial":1,"since":"2026-12-04T12:00:00Z","prepared":false}`},
		{name: "bad why", d: &tenancy.Deferred{Why: "lunch", SHA: sha, Serial: 1, Since: at}, wantErr: "deferred.why"},
		{name: "bad sha", d: &tenancy.Deferred{Why: "hold", SHA: "x", Serial: 1, Since: at}, wantErr: "deferred.sha"},
		{name: "no serial", d: &tenancy.Deferred{Why: "hold", SHA: sha, Since: at}, wantErr: "deferred.serial"},
		{name: "no since", d: &tenancy.Deferred{Why: "hold", SHA: sha, Serial: 1}, wantErr: "deferred.since"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := sendCheckin(t, tenancy.Checkin{Deferred: tt.d})
			if tt.wantErr != "" {
				require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.want == "" {
				assert.NotContains(t, body, "deferred")
				return
			}
			assert.JSONEq(t, tt.want, string(body["deferred"]))
		})
	}
}
