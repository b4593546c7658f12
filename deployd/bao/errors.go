package bao

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/errtext"
	"github.com/monky/monky-deployd/internal/scrub"
)

// The conditions of this package, each with its stable code (codes.Code.Sentinel). Every
// *Error matches exactly one of them with errors.Is, and its Code method returns the
// sentinel's code; a bare sentinel has a Code method too.
var (
	// ErrUnauthenticated: OpenBao rejected the grant at login (wrong role, garbage or
	// expired JWT, a grant superseded by a newer lease) or the token at lookup-self or
	// renew-self (invalid, revoked or expired). The operator must bootstrap the box again
	// with a fresh grant.
	ErrUnauthenticated error = codes.Unauthenticated.Sentinel("OpenBao rejected the credentials")
	// ErrSecretDenied: OpenBao answered 403 to a KV read; the token's policy does not
	// cover the path (another env's path, or a token that is no longer valid).
	ErrSecretDenied error = codes.SecretDenied.Sentinel("OpenBao denied the secret read")
	// ErrSecretMissing: the secret path does not exist (404), its latest version was
	// deleted or destroyed, or the key is absent from its data.
	ErrSecretMissing error = codes.SecretMissing.Sentinel("secret is missing")
	// ErrLeaseShape: the login response is not a plain JWT-auth service token: it is
	// response-wrapped, carries AppRole metadata (role_id, secret_id, role_name), has no
	// client token, or is a limited-use token (num_uses > 0).
	ErrLeaseShape error = codes.LeaseShape.Sentinel("login response has the wrong shape")
	// ErrSecretPath: a secret reference, mount or env id that would not stay inside the
	// env's root <kv_mount>/data/envs/<env_id>/.
	ErrSecretPath error = codes.SecretPath.Sentinel("secret path leaves the env root")
	// ErrUnavailable: OpenBao cannot answer now: sealed (503), standby or another 5xx,
	// rate limited (429), a redirect, a refused connection, a timeout, a malformed
	// response. It is temporary: retry at the next tick.
	ErrUnavailable error = codes.Unavailable.Sentinel("OpenBao is unavailable")
	// ErrConfig: New was given a Config it cannot work with (no or a malformed
	// address, an env id that is not env-<tier>-<nn>, an unsafe mount name, an
	// unreadable CA file). It is not temporary.
	ErrConfig error = codes.Config.Sentinel("invalid OpenBao client configuration")
)

// Error is the error type of every failed call of this package. It names the
// operation, the variable and the path; it never carries a token, a grant or a secret
// value, not even when the server echoes one in its error body.
type Error struct {
	// Op is the operation: "new", "login", "lookup-self", "renew-self", "revoke-self",
	// "read" or "secret-path".
	Op string
	// Kind is one of the sentinel errors of this package (ErrUnavailable, …).
	Kind error
	// Var is the variable name of a secret reference, for reads; "" otherwise.
	Var string
	// Path is the OpenBao API path (without /v1/), e.g. "secret/data/envs/env-dev-01/db".
	Path string
	// Status is the HTTP status OpenBao answered, or 0 when there was no answer.
	Status int
	// Detail explains the failure to an operator: the server's error messages with
	// anything token- or JWT-shaped masked, or what was wrong with the response.
	Detail string
	// Err is the underlying cause (a network error, a context error), or nil.
	Err error
}

// Error formats the error as "bao <op> <path> (variable <var>): <CODE>: <detail> (HTTP
// <status>): <cause>", the empty parts left out; <detail> is the Kind's text when Detail
// is empty.
func (e *Error) Error() string {
	return errtext.Join(errtext.Words("bao", e.Op, e.Path, errtext.If(e.Var != "", "(variable "+e.Var+")")),
		string(e.Code()),
		errtext.Words(cmp.Or(e.Detail, errtext.Cause(e.Kind)), errtext.If(e.Status != 0, "(HTTP "+strconv.Itoa(e.Status)+")")),
		errtext.Cause(e.Err))
}

// Code returns the stable code of the error's Kind, e.g. codes.SecretDenied
// (codes.Unavailable for a Kind that is none of the package's sentinels).
func (e *Error) Code() codes.Code {
	if code := codes.Of(e.Kind); code != "" {
		return code
	}
	return codes.Unavailable
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the error's Kind.
func (e *Error) Is(target error) bool { return target != nil && target == e.Kind }

// maxDetail bounds, in bytes, the server text kept in an error.
const maxDetail = 300

// serverDetail turns the server's error messages into an operator-readable detail
// that holds no secret (scrub.Text: every secret of the request masked first, then
// anything shaped like a JWT, a token or a long opaque run), bounded to maxDetail
// bytes.
func serverDetail(msgs []string, secrets ...string) string {
	return scrub.Text(strings.Join(msgs, "; "), maxDetail, secrets...)
}
