// Package sentinel provides the sentinel errors of the module's conditions that have
// a stable code: an error with a fixed text that also says which code of
// deployd/codes the condition has. deployd/bao, deployd/tenancy and deployd/compose
// declare their conditions with New, and the Code method of each package's error type
// reads the code off its Kind with CodeOf, so the code of a condition is written once,
// next to the condition.
//
// Like errors.New, every call of New returns a distinct error: errors.Is matches a
// sentinel only with itself, never with another of the same text or code.
package sentinel

import (
	"errors"

	"github.com/monky/monky-deployd/deployd/codes"
)

// sentinel is a condition: its text and its code.
type sentinel struct {
	code codes.Code
	text string
}

// New returns a sentinel error with the text text for a condition whose stable code
// is code. A condition without a code of its own is an errors.New.
func New(code codes.Code, text string) error { return &sentinel{code: code, text: text} }

// Error returns the sentinel's text.
func (s *sentinel) Error() string { return s.text }

// Code returns the stable code of the condition, so that errors.As with an
// interface{ Code() codes.Code } (deployd.CodeOf) finds it on a bare sentinel too.
func (s *sentinel) Code() codes.Code { return s.code }

// CodeOf returns the code of the sentinel that kind is or wraps, and false when kind
// holds none (nil, or a condition made with errors.New).
func CodeOf(kind error) (codes.Code, bool) {
	var s *sentinel
	if errors.As(kind, &s) {
		return s.code, true
	}
	return "", false
}
