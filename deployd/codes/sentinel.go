package codes

import "errors"

// Sentinel returns the sentinel error of a condition whose stable code is c: its text
// is text, it is compared by identity as errors.New's are (errors.Is matches it only
// with itself), and its Code method returns c. The conditions of deployd,
// deployd/bao, deployd/tenancy and deployd/compose are declared with it, so that the
// code of a condition is written once, next to the condition:
//
//	ErrUnavailable = codes.Unavailable.Sentinel("OpenBao is unavailable")
func (c Code) Sentinel(text string) error { return &sentinel{code: c, text: text} }

// sentinel is a condition: its text and its code.
type sentinel struct {
	code Code
	text string
}

func (s *sentinel) Error() string { return s.text }

// Code returns the stable code of the condition, so that errors.As with an
// interface{ Code() codes.Code } finds it on a bare sentinel too.
func (s *sentinel) Code() Code { return s.code }

// Of returns the stable code of the condition err is or wraps (the first error of its
// chain with a Code method that says one), or "" when it carries none: an errors.New,
// nil.
func Of(err error) Code {
	var c interface{ Code() Code }
	if errors.As(err, &c) {
		return c.Code()
	}
	return ""
}
