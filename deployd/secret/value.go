package secret

import (
	"fmt"
	"log/slog"
)

// Mask is what a Value prints instead of its content.
const Mask = "[REDACTED]"

// Value is a secret string: a token, a deploy grant or a value read from OpenBao.
// It prints as Mask through String, GoString, LogValue, every fmt verb and JSON, so
// that it cannot reach a log line or a report by accident. The zero Value is empty.
type Value struct {
	v string
}

// New wraps s as a secret Value. It does not register s with a Redactor; callers that
// own a Registry add it there as well.
func New(s string) Value { return Value{v: s} }

// Reveal returns the raw secret. Call it only where the value is sent or stored
// (an Authorization header, a login body, the .env file, the token file).
func (v Value) Reveal() string { return v.v }

// IsZero reports whether the Value is empty.
func (v Value) IsZero() bool { return v.v == "" }

// String returns Mask, or "" for the empty Value.
func (v Value) String() string {
	if v.v == "" {
		return ""
	}
	return Mask
}

// GoString returns a masked Go representation, for %#v.
func (v Value) GoString() string { return fmt.Sprintf("secret.Value(%q)", v.String()) }

// Format masks the value for every fmt verb, including %v, %+v, %#v, %s, %q and %x.
func (v Value) Format(f fmt.State, verb rune) {
	switch verb {
	case 'v':
		if f.Flag('#') {
			_, _ = fmt.Fprint(f, v.GoString())
			return
		}
		_, _ = fmt.Fprint(f, v.String())
	case 'q':
		_, _ = fmt.Fprintf(f, "%q", v.String())
	default:
		_, _ = fmt.Fprint(f, v.String())
	}
}

// LogValue masks the value in log/slog output.
func (v Value) LogValue() slog.Value { return slog.StringValue(v.String()) }

// MarshalJSON masks the value in JSON output.
func (v Value) MarshalJSON() ([]byte, error) { return []byte(`"` + v.String() + `"`), nil }

// MarshalText masks the value for encoders that use encoding.TextMarshaler.
func (v Value) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// Registry learns secret values so that they can be removed from output. A Redactor is
// a Registry; clients that receive a secret add it the moment it exists.
type Registry interface {
	// Add registers value as secret. Empty values are ignored.
	Add(value string)
}

var (
	_ fmt.Formatter  = Value{}
	_ fmt.Stringer   = Value{}
	_ fmt.GoStringer = Value{}
	_ slog.LogValuer = Value{}
)
