// Package errtext is how this module's error types write their text: a head of
// words joined with " ", then the parts of the message joined with ": ", every
// empty word or part left out, so that an Error method states its format in one
// expression.
package errtext

import "strings"

// Join returns the non-empty parts joined with ": ", the separator of a message's
// parts ("<head>: <part>: <cause>").
func Join(parts ...string) string { return join(parts, ": ") }

// Words returns the non-empty words joined with " ", the separator of the words of
// a head ("<what> <op> <path>").
func Words(words ...string) string { return join(words, " ") }

// If returns s when ok holds and "" otherwise: a word or part that only some errors
// have, such as "(HTTP 503)" for an answered request.
func If(ok bool, s string) string {
	if !ok {
		return ""
	}
	return s
}

// Cause returns the text of err, or "" for a nil err.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func join(parts []string, sep string) string {
	kept := make([]string, 0, len(parts))
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}
