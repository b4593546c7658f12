package envfile

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
)

var (
	// ErrInvalidName means a variable name does not match NamePattern.
	ErrInvalidName = errors.New("invalid variable name")
	// ErrUnrepresentable means a value cannot be written so that compose's dotenv parser
	// reads it back exactly (for example, it holds a NUL byte).
	ErrUnrepresentable = errors.New("value cannot be represented in a .env file")
)

// Error is the error Render returns: it names the variable and wraps ErrInvalidName or
// ErrUnrepresentable. It never carries the value.
type Error struct {
	// Name is the variable name (quoted with %q in Error, since it may be invalid).
	Name string
	// Err is ErrInvalidName or ErrUnrepresentable.
	Err error
}

// Error returns "envfile: variable <name>: <reason>".
func (e *Error) Error() string { return fmt.Sprintf("envfile: variable %q: %v", e.Name, e.Err) }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// NamePattern is the shape of a variable name, as a regular expression for messages:
// a letter or '_', then letters, digits and '_' (docs/BUNDLE.md). It is the one rule
// for a name in a bundle's vars and secrets and in a .env file.
const NamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`

var nameRE = regexp.MustCompile(NamePattern)

// ValidName reports whether name is a variable name: it matches NamePattern.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Render returns the .env content for vars: one NAME=value line per variable, sorted by
// name, quoted as described in the package documentation. An empty or nil map renders
// as empty content. The first invalid name or unrepresentable value (in name order)
// stops rendering with an *Error.
func Render(vars map[string]string) ([]byte, error) {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		line, err := renderLine(name, vars[name])
		if err != nil {
			return nil, err
		}
		b.WriteString(line)
	}
	return []byte(b.String()), nil
}

func renderLine(name, value string) (string, error) {
	if !ValidName(name) {
		return "", &Error{Name: name, Err: ErrInvalidName}
	}
	if strings.IndexByte(value, 0) >= 0 {
		return "", &Error{Name: name, Err: ErrUnrepresentable}
	}
	line := name + "=" + quote(value) + "\n"
	// Last guard: the line must read back exactly with compose's own parser.
	got, err := dotenv.UnmarshalWithLookup(line, nil)
	if err != nil || len(got) != 1 {
		return "", &Error{Name: name, Err: ErrUnrepresentable}
	}
	if v, ok := got[name]; !ok || v != value {
		return "", &Error{Name: name, Err: ErrUnrepresentable}
	}
	return line, nil
}

// quote returns value in the quoting that dotenv reads back literally.
func quote(value string) string {
	if !needsDoubleQuotes(value) {
		return "'" + value + "'"
	}
	var b strings.Builder
	b.Grow(len(value) + 8)
	b.WriteByte('"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '$':
			b.WriteString(`\$`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func needsDoubleQuotes(value string) bool {
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c == '\'' || c == '\\' || c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
