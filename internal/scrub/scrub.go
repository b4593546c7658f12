// Package scrub makes text that a server sent safe to put in an error message or a
// log line: the one place that decides how. The clients of monky-tenancy
// (deployd/tenancy) and of OpenBao (deployd/bao) keep a server's error message for the
// operator only after Text has run over it.
//
// Text masks the credentials the caller knows (the bearer, the grant), then anything
// shaped like a JWT, an OpenBao/Vault token or a long opaque run (a key, an id); it
// turns control characters into spaces, folds whitespace and bounds the result. If a
// credential's first bytes survive all that (a server that echoed it cut short), the
// whole text is withheld.
package scrub

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mask replaces every credential and every secret-shaped run that Text removes.
const Mask = "[REDACTED]"

// Cut ends a text that Text cut at its bound.
const Cut = "…"

// withheld is the whole result when a known credential's prefix survived the masking.
const withheld = "(server message withheld: it quoted a credential)"

// prefixLen is how many leading bytes of a known credential must not survive: a
// server may echo a credential cut short, which no exact match catches.
const prefixLen = 8

var (
	// jwtShape matches three dot-separated base64url runs, the shape of a JWT. The
	// signature segment may be short (a truncated JWT is still a credential).
	jwtShape = regexp.MustCompile(`[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}`)
	// tokenShape matches OpenBao and Vault token formats (s., b., r., hvs., hvb., hvr.
	// prefixes); the body may hold dots, as batch tokens do.
	tokenShape = regexp.MustCompile(`\b(?:hv[sbr]|[sbr])\.[A-Za-z0-9_.-]{16,}`)
	// longOpaque matches long opaque runs (keys, ids, base64) that may be secrets.
	longOpaque = regexp.MustCompile(`[A-Za-z0-9+/_=-]{40,}`)
)

// Text returns s, text a server sent, made safe for an error message: every non-empty
// known string (the caller's credentials, longest first) and every run shaped like a
// JWT, an OpenBao token or a long opaque value is replaced by Mask; invalid UTF-8
// becomes '?'; control characters and U+FFFD become spaces; runs of whitespace fold
// into one space. The result is at most limit bytes (a negative limit counts as 0),
// cut at a rune start and followed by Cut when it was longer. If the first 8 bytes of
// a known string of 8 bytes or more are still in the text before the cut (a server
// that echoed a credential cut short), the whole text is withheld: the result is a
// fixed sentence saying so, bounded the same way.
func Text(s string, limit int, known ...string) string {
	limit = max(limit, 0)
	// Longest first: a known string inside another must not break the longer one's
	// match and leave the rest of it behind.
	known = slices.Clone(known)
	slices.SortStableFunc(known, func(a, b string) int { return len(b) - len(a) })
	for _, k := range known {
		if k != "" {
			s = strings.ReplaceAll(s, k, Mask)
		}
	}
	s = strings.ToValidUTF8(s, "?")
	s = jwtShape.ReplaceAllString(s, Mask)
	s = tokenShape.ReplaceAllString(s, Mask)
	s = longOpaque.ReplaceAllString(s, Mask)
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	// Before the cut, which could hide some of a prefix but never all of the text.
	for _, k := range known {
		if len(k) >= prefixLen && strings.Contains(s, k[:prefixLen]) {
			return bound(withheld, limit)
		}
	}
	return bound(s, limit)
}

// bound cuts s, valid UTF-8, to at most limit bytes at a rune start and appends Cut
// when it was longer.
func bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + Cut
}
