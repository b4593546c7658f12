// Package jsonerr describes a JSON decoding error without any of the input: the
// position of a syntax error, the field and the kinds of a type mismatch, an unknown
// field's name, or that the input ended early. Whatever the agent decodes (a
// manifest, docker's answers, the docker CLI's configuration) may hold values of
// variables or labels, and encoding/json's own messages can quote them.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Describe says what is wrong with the JSON that err, an error of encoding/json,
// was decoding, naming no value of it.
func Describe(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		if syn.Error() == "unexpected end of JSON input" {
			return "the JSON ends early"
		}
		return fmt.Sprintf("not valid JSON (at byte %d)", syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		kind, _, _ := strings.Cut(typ.Value, " ") // "number 5" → "number": no value
		return fmt.Sprintf("field %q is a JSON %s, want %s", field, kind, typ.Type)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the JSON ends early"
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + name // the key as written, a name
	}
	return "not valid JSON"
}
