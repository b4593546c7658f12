// Package jsontest holds what the tests that compare the JSON of a fake with the JSON
// of the real server share: the one vocabulary of the kind of a decoded value. Only
// tests import it; it imports the standard library alone.
package jsontest

import "fmt"

// Kind returns the JSON kind of v, a value that encoding/json decoded into an any:
// "null", "object", "array", "string", "number" or "bool", and v's Go type for
// anything else.
func Kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}
