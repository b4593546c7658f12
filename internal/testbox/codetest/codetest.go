// Package codetest holds the test check of an error that carries a stable code: the
// one check the client tests of deployd/bao and deployd/tenancy make of every error
// they expect. It imports only deployd/codes and testify, so a test that uses it links
// neither the agent (the deployd package) nor a client library it does not test.
package codetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// RequireCoded requires err to be of kind (errors.Is) and to wrap an E (errors.As),
// asserts that the E's Code() and codes.Of(err) are both code, and returns the E.
func RequireCoded[E interface {
	error
	Code() codes.Code
}](t testing.TB, err, kind error, code codes.Code) E {
	t.Helper()
	require.ErrorIs(t, err, kind)
	var e E
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code())
	assert.Equal(t, code, codes.Of(err))
	return e
}
