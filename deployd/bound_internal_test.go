package deployd

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBoundsCutAtRuneBoundaries: the report's detail and tail are bounded, and a cut
// never splits a multi-byte character (the report is JSON; a split rune would reach
// tenancy as U+FFFD or be refused).
func TestBoundsCutAtRuneBoundaries(t *testing.T) {
	for shift := range 4 {
		s := strings.Repeat("x", shift) + strings.Repeat("ä€𝄞", 3000)
		d := boundDetail(s)
		if len(d) > maxDetail || !utf8.ValidString(d) || !strings.HasSuffix(d, detailCut) {
			t.Errorf("shift %d: detail of %d bytes, valid %t", shift, len(d), utf8.ValidString(d))
		}
		tl := boundTail(s)
		if len(tl) > maxTail || !utf8.ValidString(tl) || !strings.HasSuffix(s, tl) || len(tl) < maxTail-3 {
			t.Errorf("shift %d: tail of %d bytes, valid %t", shift, len(tl), utf8.ValidString(tl))
		}
	}
	if got := boundDetail("short"); got != "short" {
		t.Errorf("a short detail changed: %q", got)
	}
	if got := boundTail("short"); got != "short" {
		t.Errorf("a short tail changed: %q", got)
	}
}
