package engine

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/internal/errtext"
)

// The conditions of the package, matched with errors.Is on an *Error.
var (
	// ErrUnsupported is a docker endpoint this client cannot speak to (ssh://, npipe://,
	// fd://, TLS), whether DOCKER_HOST or a docker context names it: read through the
	// docker CLI instead.
	ErrUnsupported = errors.New("docker endpoint not supported by the Engine API client; read through the docker CLI instead")
	// ErrUnreachable is a failure to connect to the daemon's socket.
	// It matches compose.ErrDockerUnavailable too.
	ErrUnreachable = fmt.Errorf("docker engine unreachable: %w", compose.ErrDockerUnavailable)
	// ErrTimeout is a daemon that gave no complete answer before the deadline: the box
	// is slow or dockerd hangs. It matches compose.ErrDockerTimeout too.
	ErrTimeout = fmt.Errorf("docker engine did not answer in time: %w", compose.ErrDockerTimeout)
	// ErrNotFound is the daemon's 404: no such container or image.
	ErrNotFound = errors.New("not found")
	// ErrInUse is the daemon's 409 to an image removal: a container (running or
	// stopped) still uses the image, or it is tagged in several repositories. The image
	// stays.
	ErrInUse = errors.New("image in use")
)

// maxMessage bounds the daemon's message kept in an Error.
const maxMessage = 512

// Error is the error type of this package.
type Error struct {
	// Op is the operation: "new", "endpoint" (Resolve), "containers", "inspect",
	// "version", "images", "images in use" or "remove image".
	Op string
	// Host is the daemon's address, e.g. "unix:///var/run/docker.sock".
	Host string
	// Path is the request path without its query, e.g. "/containers/json"; "" for New.
	Path string
	// Status is the HTTP status of the daemon's answer, 0 when there was none.
	Status int
	// Message is the daemon's own message ({"message": "…"}), at most 512 bytes.
	Message string
	// Err is the underlying cause, if any: a sentinel, a network or decoding error.
	Err error
}

// Error says what failed, where, and what to do next: "docker engine <op> <path> on
// <host>: HTTP <status>: <message> (<hint>): <cause>", the empty parts left out; the
// message and the hint only with a status.
func (e *Error) Error() string {
	answer := errtext.Words(errtext.Join("HTTP "+strconv.Itoa(e.Status), e.Message),
		errtext.If(e.Status == http.StatusConflict && e.Op == "remove image", "(the image stays; it is removed once no container uses it)"),
		errtext.If(e.Status >= 500, "(the daemon failed: see journalctl -u docker)"))
	return errtext.Join(errtext.Words("docker engine", e.Op, e.Path, errtext.If(e.Host != "", "on "+e.Host)),
		errtext.If(e.Status != 0, answer), errtext.Cause(e.Err))
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches ErrNotFound to a 404 and ErrInUse to a 409 of the daemon; the other
// sentinels match through Unwrap.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrInUse:
		return e.Status == http.StatusConflict
	}
	return false
}

// daemonMessage is the daemon's error text from an error body: the "message" of
// {"message": "…"}, else the body itself, printable, at most maxMessage bytes.
func daemonMessage(body []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	s := string(body)
	if jsonUnmarshal(body, &m) == nil && m.Message != "" {
		s = m.Message
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, strings.TrimSpace(s))
	if len(s) > maxMessage {
		s = strings.ToValidUTF8(s[:maxMessage], "") + " …"
	}
	return s
}
