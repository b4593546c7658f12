package secret

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// MinSubstringLen is the length, in bytes, from which a registered form of a secret is
// replaced wherever it occurs. A shorter secret (a 1–3 byte "password") is still
// registered, but it is replaced only where it stands as a whole token: bounded on both
// sides by the start or end of the text or by a byte that is not an ASCII letter, digit
// or underscore. Replacing it inside every word would shred each log line and, worse,
// the pattern of the masks would spell out the secret; as a whole token it is still
// caught in "password=ab", `"ab"` or "ab\n".
const MinSubstringLen = 4

// Redactor removes every registered secret from text: log records, error texts, report
// tails, subprocess output and files the agent writes. It is safe for concurrent use and
// implements Registry. The zero Redactor is ready to use and redacts nothing until a
// value is added; NewRedactor is the same thing as new(Redactor).
//
// Add registers a value together with the encoded forms in which it can reach an
// output (see Add). Redact replaces every occurrence of any registered form with Mask;
// occurrences that overlap or touch are merged under one Mask, so a secret that overlaps
// another one is never left half visible.
//
// Registration is copy-on-write: Add builds a new generation (the previous one plus the
// new value's forms) under a mutex and publishes it atomically, so Redact, the Handler
// and the Writer never take a lock to read the set.
type Redactor struct {
	mu     sync.Mutex
	values map[string]struct{}
	state  atomic.Pointer[compiled]
}

var _ Registry = (*Redactor)(nil)

// compiled is one immutable generation of the registered forms, indexed by their first
// two bytes so that a scan costs one table lookup per byte of text when nothing matches.
type compiled struct {
	first     [1 << 16 / 64]uint64 // bit set of the first two bytes of every form of 2+ bytes
	cand      map[uint16][]pattern // forms by their first two bytes, longest first
	single    [256]bool            // forms of one byte (always whole-token)
	hasSingle bool                 // some form has one byte
	maxLen    int                  // length of the longest form
}

// pattern is one registered form; whole means it counts only as a whole token.
type pattern struct {
	s     string
	whole bool
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return new(Redactor) }

// noSecrets is the generation of a Redactor to which nothing was added. It is never
// modified; compiled.with copies it.
var noSecrets = &compiled{}

// load returns the current generation.
func (r *Redactor) load() *compiled {
	if c := r.state.Load(); c != nil {
		return c
	}
	return noSecrets
}

// Add registers value as secret. Empty values are ignored; adding a value twice is a
// no-op. Besides the raw value, Add registers the forms in which the value can be
// written by the agent's encoders and by the programs whose output it relays:
//
//   - JSON-escaped, with and without HTML escaping (encoding/json and log/slog);
//   - Go-quoted, the inner part of %q and strconv.Quote, also its ASCII-only variant
//     (%+q), which is what the slog text handler writes;
//   - the .env forms: single-quoted (a ' escaped as \') and double-quoted with
//     backslash escapes (\\ \" \$ \n \r \t), and with $ doubled as $$;
//   - URL-escaped, as a query value, as a path segment, as URL user info, and with
//     every reserved byte escaped (upper- and lowercase hex, and encodeURIComponent's
//     variant), the forms a password takes inside a DSN;
//   - base64, standard and URL alphabets: the characters that depend on the value's bytes
//     alone at each of the three byte alignments, so the value is caught inside the
//     base64 of a larger text too (an HTTP Basic Authorization header, a docker auth);
//   - for a multi-line value, each of its lines (and its trimmed form) of at least
//     MinSubstringLen bytes, because line-oriented output splits it.
//
// A value shorter than MinSubstringLen bytes is registered with its escaped forms but
// replaced only as a whole token (see MinSubstringLen); its base64 and line forms are not
// registered.
func (r *Redactor) Add(value string) {
	if value == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.values[value]; ok {
		return
	}
	if r.values == nil {
		r.values = map[string]struct{}{}
	}
	r.values[value] = struct{}{}
	r.state.Store(r.load().with(formsOf(value)))
}

// formsOf returns the registered forms of one raw value.
func formsOf(v string) []pattern {
	seen := map[string]bool{}
	var out []pattern
	add := func(f string, whole bool) {
		if f == "" || seen[f] || !whole && len(f) < MinSubstringLen {
			return
		}
		seen[f] = true
		out = append(out, pattern{s: f, whole: whole})
	}
	if len(v) < MinSubstringLen {
		for _, f := range escapedForms(v) {
			add(f, true)
		}
		return out
	}
	for _, f := range escapedForms(v) {
		add(f, false)
	}
	for _, f := range base64Forms(v) {
		add(f, false)
	}
	if strings.ContainsAny(v, "\r\n") {
		for line := range strings.Lines(v) {
			line = strings.TrimRight(line, "\r\n")
			for _, l := range []string{line, strings.TrimSpace(line)} {
				if len(l) < MinSubstringLen {
					continue
				}
				for _, f := range escapedForms(l) {
					add(f, false)
				}
			}
		}
	}
	return out
}

// with returns a new generation: c plus forms. c is not modified.
func (c *compiled) with(forms []pattern) *compiled {
	n := &compiled{first: c.first, cand: maps.Clone(c.cand), single: c.single, hasSingle: c.hasSingle, maxLen: c.maxLen}
	if n.cand == nil {
		n.cand = map[uint16][]pattern{}
	}
	for _, p := range forms {
		n.maxLen = max(n.maxLen, len(p.s))
		if len(p.s) == 1 {
			n.single[p.s[0]] = true
			n.hasSingle = true
			continue
		}
		k := uint16(p.s[0])<<8 | uint16(p.s[1])
		n.first[k>>6] |= 1 << (k & 63)
		ps := slices.Clone(n.cand[k])
		if slices.Contains(ps, p) {
			continue
		}
		// Longest first; between equal lengths, substring forms before whole-token ones.
		i, _ := slices.BinarySearchFunc(ps, p, func(a, b pattern) int {
			if len(a.s) != len(b.s) {
				return len(b.s) - len(a.s)
			}
			if a.whole != b.whole {
				if a.whole {
					return 1
				}
				return -1
			}
			return strings.Compare(a.s, b.s)
		})
		n.cand[k] = slices.Insert(ps, i, p)
	}
	return n
}

// escapedForms returns v and the textual encodings of v (duplicates allowed).
func escapedForms(v string) []string {
	forms := []string{v}
	if b, err := json.Marshal(v); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		forms = append(forms, string(b[1:len(b)-1]))
	}
	q := strconv.Quote(v)
	forms = append(forms, q[1:len(q)-1])
	q = strconv.QuoteToASCII(v)
	forms = append(forms, q[1:len(q)-1])
	forms = append(forms, strings.ReplaceAll(v, "'", `\'`))
	dq := dotenvDoubleQuoted.Replace(v)
	forms = append(forms, dq, strings.ReplaceAll(dq, `\$`, "$$"), strings.ReplaceAll(v, "$", "$$"))
	forms = append(forms, url.QueryEscape(v), url.PathEscape(v), url.User(v).String())
	forms = append(forms, percentEncode(v, "", upperHex), percentEncode(v, "", lowerHex), percentEncode(v, "!*'()", upperHex))
	return forms
}

const (
	upperHex = "0123456789ABCDEF"
	lowerHex = "0123456789abcdef"
)

// percentEncode escapes every byte of v except RFC 3986's unreserved characters and
// those in keep, with the given hex digits: Python's quote(v, safe="") and, with keep
// "!*'()", JavaScript's encodeURIComponent, the forms a password takes in a DSN.
func percentEncode(v, keep, hex string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// dotenvDoubleQuoted escapes a value for a double-quoted .env value as compose's dotenv
// parser reads it back.
var dotenvDoubleQuoted = strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "\n", `\n`, "\r", `\r`, "\t", `\t`)

// base64Forms returns, for the standard and the URL alphabet and for each of the three
// byte alignments, the base64 characters that are determined by the bytes of v alone.
func base64Forms(v string) []string {
	var forms []string
	n := len(v)
	for k := range 3 {
		buf := make([]byte, k+n+2)
		copy(buf[k:], v)
		first := (8*k + 5) / 6    // first character whose 6 bits all come from v
		last := (8 * (k + n)) / 6 // one past the last such character
		if last <= first {
			continue
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			s := enc.EncodeToString(buf)
			forms = append(forms, s[first:last])
		}
	}
	return forms
}

// Redact returns s with every occurrence of a registered secret replaced by Mask.
func (r *Redactor) Redact(s string) string { return r.load().redact(s) }

// RedactBytes returns b with every occurrence of a registered secret replaced by Mask.
// It returns b itself when there is nothing to replace and a new slice otherwise; b is
// never modified.
func (r *Redactor) RedactBytes(b []byte) []byte {
	iv := r.load().find(string(b))
	if len(iv) == 0 {
		return b
	}
	return appendMasked(make([]byte, 0, len(b)), b, iv)
}

// appendMasked appends b to dst with the intervals iv replaced by Mask.
func appendMasked(dst, b []byte, iv []interval) []byte {
	prev := 0
	for _, x := range iv {
		dst = append(dst, b[prev:x.start]...)
		dst = append(dst, Mask...)
		prev = x.end
	}
	return append(dst, b[prev:]...)
}

// interval is a half-open byte range [start, end) to be masked.
type interval struct{ start, end int }

// find returns the sorted, merged intervals of s that registered forms cover. Every
// occurrence counts, overlapping ones included, so that overlapping secrets are masked
// in full.
func (c *compiled) find(s string) []interval {
	if c.maxLen == 0 || len(s) == 0 {
		return nil
	}
	var iv []interval
	first := &c.first
	prev := uint16(s[0])
	for i := 0; i < len(s); i++ {
		if c.hasSingle && c.single[s[i]] && isToken(s, i, i+1) {
			iv = addInterval(iv, i, i+1)
		}
		if i+1 == len(s) {
			break
		}
		k := prev<<8 | uint16(s[i+1])
		prev = uint16(s[i+1])
		if first[k>>6]&(1<<(k&63)) == 0 {
			continue
		}
		for _, p := range c.cand[k] {
			end := i + len(p.s)
			if end <= len(s) && s[i:end] == p.s && (!p.whole || isToken(s, i, end)) {
				iv = addInterval(iv, i, end)
				break // the longest form at i; shorter ones end inside it
			}
		}
	}
	return iv
}

// addInterval appends [start, end) to iv, merging it with the last interval when they
// overlap or touch; starts arrive in increasing order.
func addInterval(iv []interval, start, end int) []interval {
	if n := len(iv); n > 0 && start <= iv[n-1].end {
		iv[n-1].end = max(iv[n-1].end, end)
		return iv
	}
	return append(iv, interval{start, end})
}

// isToken reports whether s[start:end] is bounded by the ends of s or by bytes that are
// not ASCII letters, digits or underscores.
func isToken(s string, start, end int) bool {
	return (start == 0 || !isWordByte(s[start-1])) && (end == len(s) || !isWordByte(s[end]))
}

// isWordByte reports whether b is an ASCII letter, digit or underscore.
func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}
