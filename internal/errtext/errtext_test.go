package errtext

import (
	"errors"
	"testing"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name, got, want string
	}{
		{"join: all parts", Join("bao read", "SECRET_MISSING", "no key"), "bao read: SECRET_MISSING: no key"},
		{"join: empty parts left out", Join("", "a", "", "b", ""), "a: b"},
		{"join: none", Join(), ""},
		{"join: all empty", Join("", ""), ""},
		{"join: one part", Join("transport: client closed"), "transport: client closed"},
		{"words: all words", Words("docker engine", "inspect", "/x"), "docker engine inspect /x"},
		{"words: empty words left out", Words("", "bao", "", "read", ""), "bao read"},
		{"words: none", Words(), ""},
		{"if: kept", If(true, "(HTTP 503)"), "(HTTP 503)"},
		{"if: dropped", If(false, "(HTTP 0)"), ""},
		{"cause: error", Cause(errors.New("connection refused")), "connection refused"},
		{"cause: nil", Cause(nil), ""},
		{"nested", Join(Words("a", If(false, "b"), "c"), Cause(nil), Words("d", "(e)")), "a c: d (e)"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
