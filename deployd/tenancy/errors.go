package tenancy

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/errtext"
	"github.com/monky/monky-deployd/internal/scrub"
)

// The kinds of failure of a tenancy call. An *APIError wraps exactly one of them.
// Each has its stable code (codes.Code.Sentinel), except ErrProtocol and
// ErrInvalidArgument, which have none of their own.
var (
	// ErrUnauthenticated is a 401: the bearer (the OpenBao token) is not accepted.
	ErrUnauthenticated error = codes.Unauthenticated.Sentinel("tenancy: unauthenticated")
	// ErrEnvMismatch is a 409, or a 403 with code AGENT_ENV_MISMATCH: the token
	// belongs to another environment than the one the agent names. Never retried.
	ErrEnvMismatch error = codes.AgentEnvMismatch.Sentinel("tenancy: environment mismatch")
	// ErrRateLimited is a 429: the lease budget of the environment is spent.
	ErrRateLimited error = codes.RateLimited.Sentinel("tenancy: rate limited")
	// ErrLeaseShape is a lease the agent refuses: AppRole or response-wrapped shape,
	// a grant that is not a JWT, another auth mount or role, an expired lease.
	ErrLeaseShape error = codes.LeaseShape.Sentinel("tenancy: lease shape refused")
	// ErrUnavailable is a 408 or 5xx answer, a timeout, a refused or reset connection.
	ErrUnavailable error = codes.Unavailable.Sentinel("tenancy: unavailable")
	// ErrProtocol is a response that breaks the contract (unexpected status, bad JSON,
	// a field out of range).
	ErrProtocol error = codes.TenancyProtocol.Sentinel("tenancy: protocol error")
	// ErrBundleTooLarge is a bundle larger than Config.MaxBundleSize.
	ErrBundleTooLarge error = codes.BundleMalformed.Sentinel("tenancy: bundle too large")
	// ErrSignatureTooLarge is a signature answer longer than MaxSignatureSize: not a
	// signature file (code SIGNATURE_INVALID).
	ErrSignatureTooLarge error = codes.SignatureInvalid.Sentinel("tenancy: signature too large")
	// ErrInvalidArgument is a call the client refuses to send (a malformed sha, an
	// unknown result, a missing env_id). It is not wrapped in an *APIError.
	ErrInvalidArgument error = errors.New("tenancy: invalid argument")
)

const (
	// maxMessage bounds, in bytes, the server text kept in an APIError's Message.
	maxMessage = 200
	// maxField bounds, in bytes, a server-provided field quoted in a message.
	maxField            = 64
	maxServerCodeLength = 64
)

// APIError is the failure of one tenancy call. Kind is one of the Err* sentinels
// (errors.Is matches it); Err, when set, is the underlying transport or decoding error.
// Neither its fields nor its text carry a token, a grant or an echoed server body.
type APIError struct {
	// Op is the call: "checkin", "bundle", "signature", "lease" or "report".
	Op string
	// Status is the HTTP status, 0 when no response was received.
	Status int
	// ServerCode is error.code of the server's error body, when it looked like a code.
	ServerCode string
	// Message is a bounded, sanitised description: the server's error.message or the
	// client's own account (naming the offending field).
	Message string
	// RetryAfter is the server's Retry-After (seconds or HTTP date), 0 if none.
	RetryAfter time.Duration
	// Kind is the sentinel of the condition.
	Kind error
	// Err is the underlying error, if any.
	Err error
}

// Error returns a one-line description: op, status, server code and message, then the
// cause and the Retry-After: "tenancy: <op>: HTTP <status> <CODE>: <message>: <cause>
// (retry after <d>)", the empty parts left out.
func (e *APIError) Error() string {
	head := errtext.Words(errtext.Join("tenancy", e.Op, errtext.If(e.Status != 0, "HTTP "+strconv.Itoa(e.Status))), e.ServerCode)
	return errtext.Words(errtext.Join(head, e.Message, errtext.Cause(e.Err)),
		errtext.If(e.RetryAfter > 0, "(retry after "+e.RetryAfter.String()+")"))
}

// Unwrap returns the underlying error, so that errors.Is(err, context.DeadlineExceeded)
// and errors.As(err, *net.OpError) reach it.
func (e *APIError) Unwrap() error { return e.Err }

// Is reports whether target is the kind of e.
func (e *APIError) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// Code returns the stable code of the kind, as the agent reports it.
func (e *APIError) Code() codes.Code {
	return codes.Of(e.Kind)
}

// RetryAfter returns the Retry-After the server sent with err, if any.
func RetryAfter(err error) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter, true
	}
	return 0, false
}

// serverCodeRE is the shape of a server error code worth keeping.
var serverCodeRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// sanitiseCode keeps a server error code only when it looks like one.
func sanitiseCode(code string) string {
	if len(code) > maxServerCodeLength || !serverCodeRE.MatchString(code) {
		return ""
	}
	return code
}

// sanitiseMessage makes server-provided text safe for an error (scrub.Text: known
// secrets and secret-shaped runs masked, control characters gone), bounded to
// maxMessage bytes.
func sanitiseMessage(msg string, known ...string) string {
	return scrub.Text(msg, maxMessage, known...)
}

// quoteField bounds and sanitises a server-provided non-secret value (an auth mount,
// a role, an action) for an error message.
func quoteField(v string) string {
	return fmt.Sprintf("%q", scrub.Text(v, maxField))
}
