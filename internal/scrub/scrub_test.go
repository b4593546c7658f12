package scrub

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const (
	// secret is a known credential planted in the texts (a KV-value-like string that
	// no shape rule catches on its own).
	secret = "zz-known-Secret!value"
	jwt    = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJlbnYifQ.c2lnbmF0dXJl"
)

var tests = []struct {
	name  string
	in    string
	limit int
	known []string
	want  string
}{
	{"plain", `role "x" could not be found`, 300, nil, `role "x" could not be found`},
	{"known secret", "bad jwt: " + secret + " rejected", 300, []string{secret}, "bad jwt: [REDACTED] rejected"},
	{"empty known ignored", "a b", 300, []string{""}, "a b"},
	{"known longest first", "x zz-known-Secret!value-and-more y", 300, []string{secret, secret + "-and-more"}, "x [REDACTED] y"},
	{"jwt", "grant " + jwt + " superseded", 300, nil, "grant [REDACTED] superseded"},
	{"jwt short signature", "grant abcdefgh.ijklmnop.qrst!", 300, nil, "grant [REDACTED]!"},
	{"hvs token", "token hvs.CAESIJ0123456789abcdefghij is bad", 300, nil, "token [REDACTED] is bad"},
	{"s token", "token s.AAAAAAAAAAAAAAAAAAAAAAAA!", 300, nil, "token [REDACTED]!"},
	{"dotted token", "b.AAAAAAAAAAAAAAAA.BBBBBBBB.CC end", 300, nil, "[REDACTED] end"},
	{"not a token", "use s.short or this.AAAAAAAAAAAAAAAAAAAA", 300, nil, "use s.short or this.AAAAAAAAAAAAAAAAAAAA"},
	{"long opaque", "key " + strings.Repeat("Zz9/", 10), 300, nil, "key [REDACTED]"},
	{"short opaque kept", "key " + strings.Repeat("Z", 39), 300, nil, "key " + strings.Repeat("Z", 39)},
	{"control", "line1\nline2\x1b[31m\u0085x\ufffdy\x7fz", 300, nil, "line1 line2 [31m x y z"},
	{"invalid utf8", "bad \xff byte", 300, nil, "bad ? byte"},
	{"whitespace folded", "  1 error occurred:\n\t* permission denied\n\n", 300, nil, "1 error occurred: * permission denied"},
	{"bound", strings.Repeat("é", 400), 300, nil, strings.Repeat("é", 150) + Cut},
	{"bound at a rune start", "a" + strings.Repeat("é", 200), 300, nil, "a" + strings.Repeat("é", 149) + Cut},
	{"bound exact", strings.Repeat("x ", 10)[:19], 19, nil, strings.Repeat("x ", 10)[:19]},
	{"negative limit", "abc", -1, nil, Cut},
	{"known secret across the bound", strings.Repeat("w ", 140) + secret, 285, []string{secret}, strings.Repeat("w ", 140) + "[REDA" + Cut},
	{"known secret cut short by the server", "you sent " + secret[:12] + "…", 300, []string{secret}, withheld},
	{"known secret's prefix at the bound", strings.Repeat("w ", 10) + secret[:9], 300, []string{secret}, withheld},
	{"withheld is bounded", "you sent " + secret[:12], 10, []string{secret}, withheld[:10] + Cut},
}

func TestText(t *testing.T) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			known := slices.Clone(tc.known)
			got := Text(tc.in, tc.limit, known...)
			if !slices.Equal(known, tc.known) {
				t.Errorf("Text reordered the caller's known: %q", known)
			}
			if got != tc.want {
				t.Errorf("Text(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
			}
			for _, k := range tc.known {
				if k != "" && strings.Contains(got, k) {
					t.Errorf("Text(%q) = %q holds the known secret", tc.in, got)
				}
			}
			if limit := max(tc.limit, 0); len(got) > limit+len(Cut) {
				t.Errorf("Text(%q, %d) is %d bytes long", tc.in, tc.limit, len(got))
			}
		})
	}
}

// FuzzScrub plants a known secret in arbitrary text: it never survives, the bound
// holds, and the result is valid UTF-8 without control characters.
func FuzzScrub(f *testing.F) {
	for _, tc := range tests {
		f.Add(tc.in, secret, "", uint16(max(tc.limit, 0)))
	}
	f.Add("you sent ", secret[:12], "…", uint16(300))
	f.Add("\xff", "abcdefgh\n\x00", "ijkl", uint16(3))
	f.Fuzz(func(t *testing.T, before, sec, after string, limit uint16) {
		n := int(limit)
		if len(sec) < prefixLen || strings.Contains(bound(withheld, n), sec) {
			// Shorter known strings are only masked where they appear whole; the
			// fixed sentence of a withheld text is not a secret.
			t.Skip()
		}
		in := before + sec + after
		got := Text(in, n, sec)
		if strings.Contains(got, sec) {
			t.Fatalf("Text(%q, %d, %q) = %q holds the secret", in, n, sec, got)
		}
		if len(got) > n+len(Cut) {
			t.Fatalf("Text(%q, %d) = %q is %d bytes long", in, n, got, len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q is not valid UTF-8", in, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) {
				t.Fatalf("Text(%q) = %q keeps the control character %U", in, got, r)
			}
		}
	})
}
