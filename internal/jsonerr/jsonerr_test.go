package jsonerr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestDescribe: each kind of decoding error is told by kind, position or field.
func TestDescribe(t *testing.T) {
	type target struct {
		Serial int64 `json:"serial"`
	}
	strict := func(s string) error {
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		var v target
		return d.Decode(&v)
	}
	loose := func(s string) error { var v target; return json.Unmarshal([]byte(s), &v) }
	for _, c := range []struct {
		err  error
		want string
	}{
		{loose(`{"serial": "s3cr3t"}`), `field "serial" is a JSON string, want int64`},
		{loose(`{"serial": 1.5e3}`), `field "serial" is a JSON number, want int64`},
		{loose(`[1]`), `field "(top level)" is a JSON array, want jsonerr.target`},
		{loose(`{"serial": 1,,}`), "not valid JSON (at byte 14)"},
		{loose(`{"serial": 1`), "the JSON ends early"},
		{strict(`{"serial": 1, "extra": 2}`), `unknown field "extra"`},
		{strict(``), "the JSON ends early"},
		{errors.New("something else"), "not valid JSON"},
	} {
		if got := Describe(c.err); got != c.want {
			t.Errorf("Describe(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// FuzzDescribe: no value of the input reaches the description; only the keys may.
func FuzzDescribe(f *testing.F) {
	f.Add(`{"serial": "s3cr3t-value"}`)
	f.Add(`{"serial": 98765}`)
	f.Fuzz(func(t *testing.T, value string) {
		doc, _ := json.Marshal(map[string]string{"serial": value})
		var v struct {
			Serial int64 `json:"serial"`
		}
		err := json.Unmarshal(doc, &v)
		if err == nil {
			return
		}
		if d := Describe(err); len(value) > 3 && strings.Contains(d, value) && !strings.Contains(`field "serial" is a JSON string, want int64`, value) {
			t.Fatalf("the description %q carries the value %q", d, value)
		}
	})
}
