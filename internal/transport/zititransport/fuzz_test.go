package zititransport

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/monky/monky-deployd/internal/transport"
	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// longWord returns a run of at least 24 non-space characters of s, if any: such a
// run in an identity's key must never appear in an error (the messages are made of
// short words and field names).
func longWord(s string) string {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == ':' }) {
		if len(w) >= 24 {
			return w
		}
	}
	return ""
}

func FuzzParseIdentity(f *testing.F) {
	transporttest.SeedFiles(f, "identity/*.json")
	f.Add([]byte(`{"ztAPIs":["https://c1:1280/edge/client/v1"],"id":{"cert":"pem:x","key":"pem:y"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseIdentity(data)
		if err == nil {
			if c == nil || c.ZtAPI == "" || strings.TrimSpace(c.ID.Key) == "" || strings.TrimSpace(c.ID.Cert) == "" {
				t.Fatalf("accepted an identity without controller, cert or key: %+v", c)
			}
			// The key must not be rejected later with its value in the text either.
			// Only inline values are loaded: a file: or engine: address from the
			// fuzzer would read arbitrary files or load a key engine library.
			if !inlineOnly(c.ID.Key, c.ID.Cert, c.ID.CA) {
				return
			}
			if _, lerr := loadIdentity(c.ID); lerr != nil {
				if w := longWord(c.ID.Key); w != "" && strings.Contains(lerr.Error(), w) {
					t.Fatalf("load error quotes the key: %v", lerr)
				}
			}
			return
		}
		if !errors.Is(err, transport.ErrIdentity) {
			t.Fatalf("error %v is not ErrIdentity", err)
		}
		var doc struct {
			ID struct {
				Key json.RawMessage `json:"key"`
			} `json:"id"`
		}
		if json.Unmarshal(data, &doc) == nil {
			if w := longWord(string(doc.ID.Key)); w != "" && strings.Contains(err.Error(), w) {
				t.Fatalf("error quotes the key: %v", err)
			}
		}
	})
}

// inlineOnly reports whether every non-empty address is inline PEM.
func inlineOnly(addrs ...string) bool {
	for _, a := range addrs {
		if a != "" && !strings.HasPrefix(a, "pem:") {
			return false
		}
	}
	return true
}
