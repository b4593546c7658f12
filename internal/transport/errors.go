package transport

import (
	"cmp"
	"errors"
	"strconv"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/errtext"
)

// The conditions of the package. An *Error carries exactly one of them as its Kind and
// errors.Is matches it.
var (
	// ErrInvalidConfig is a tenancy block the package cannot build a transport from: an
	// unknown transport, a missing or malformed url, service, identity or proxy, a
	// negative timeout. The error names the key.
	ErrInvalidConfig = errors.New("transport: invalid tenancy config")
	// ErrCAFile is a tenancy.ca_file that cannot be read or holds no usable PEM
	// certificate.
	ErrCAFile = errors.New("transport: unusable ca_file")
	// ErrIdentity is a tenancy.identity file that cannot be read or is not a usable
	// OpenZiti identity. The error names the file and the field, never key material.
	ErrIdentity = errors.New("transport: unusable OpenZiti identity")
	// ErrUnreachable is the umbrella of every failure to open a connection to tenancy
	// that is not a plain socket error: an OpenZiti dial that failed (no edge router,
	// the service unknown or not dialable, the controller unreachable or refusing the
	// identity), a dial interrupted by its context, or a proxy that refused CONNECT.
	// ErrServiceNotFound and ErrController are also ErrUnreachable.
	ErrUnreachable = errors.New("transport: tenancy unreachable")
	// ErrServiceNotFound is an OpenZiti service this identity cannot see: it does not
	// exist or no Dial service policy grants it to the identity.
	ErrServiceNotFound = errors.New("transport: OpenZiti service not found or not dialable")
	// ErrController is a failed authentication with the OpenZiti controller: the
	// controller is unreachable or refused the identity.
	ErrController = errors.New("transport: OpenZiti controller authentication failed")
	// ErrClosed is a dial through a Client after Close.
	ErrClosed = errors.New("transport: client closed")
	// ErrNeedsSDK is tenancy.transport "sdk" given to New, which does not link the
	// OpenZiti SDK: internal/transport/zititransport.New builds that transport.
	ErrNeedsSDK = errors.New("transport: the sdk transport needs the OpenZiti SDK")
)

// Error is the one error type of the package. Its text names the config key, the file
// and the OpenZiti service concerned; it never carries key material, a token or the
// content of a file.
//
// A failed dial reaches the caller of http.Client.Do as
// *url.Error → *net.OpError (Op "dial" or "proxyconnect") → *Error, so that
// errors.As(err, **net.OpError) finds a network error, errors.Is(err, ErrUnreachable)
// classifies it and url.Error.Timeout() reports a timed-out dial.
type Error struct {
	// Kind is the sentinel of the condition (ErrCAFile, ErrUnreachable, …).
	Kind error
	// Key is the config key concerned, e.g. "tenancy.ca_file"; empty for dial errors.
	Key string
	// Path is the file concerned (ca_file, identity), if any.
	Path string
	// Service is the OpenZiti service of a failed dial, if any.
	Service string
	// Detail is a short account of what is wrong, naming fields but never values that
	// could be secret.
	Detail string
	// Err is the underlying cause, if any. It never carries key material.
	Err error

	timeout bool
}

// Error returns "transport: <key> <path>: <detail>: <cause>" with the empty parts left
// out, or for a dial "transport: dial OpenZiti service "<service>": <detail>: <cause>";
// with neither a head nor a detail, the Kind's text (without its "transport: ") stands
// for the detail.
func (e *Error) Error() string {
	head := errtext.Words(errtext.If(e.Service != "", "dial OpenZiti service "+strconv.Quote(e.Service)), e.Key, e.Path)
	detail := cmp.Or(e.Detail, errtext.If(head == "", strings.TrimPrefix(errtext.Cause(e.Kind), "transport: ")))
	return "transport: " + errtext.Join(head, detail, errtext.Cause(e.Err))
}

// Unwrap returns the underlying cause, so that errors.Is(err, context.DeadlineExceeded)
// or errors.Is(err, fs.ErrNotExist) reach it.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the kind of e; ErrServiceNotFound and ErrController are
// also ErrUnreachable.
func (e *Error) Is(target error) bool {
	if e.Kind == nil {
		return false
	}
	if target == e.Kind {
		return true
	}
	return target == ErrUnreachable && (e.Kind == ErrServiceNotFound || e.Kind == ErrController)
}

// Code returns codes.Unavailable (the tenancy-phase code) for the ErrUnreachable
// family and "" (no stable code of its own: a configuration error) otherwise.
func (e *Error) Code() codes.Code {
	if e.Is(ErrUnreachable) {
		return codes.Unavailable
	}
	return ""
}

// Timeout reports whether the failure was a timeout: a dial whose context deadline
// passed, or a cause that says it timed out (net.Error semantics).
func (e *Error) Timeout() bool {
	if e.timeout {
		return true
	}
	var t interface{ Timeout() bool }
	return e.Err != nil && errors.As(e.Err, &t) && t.Timeout()
}

// Temporary reports whether a retry at the next tick may succeed: true for the
// ErrUnreachable family, false for configuration errors and ErrClosed.
func (e *Error) Temporary() bool { return e.Is(ErrUnreachable) }
