package compose

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/sentinel"
)

// The conditions of this package, each with its stable code (internal/sentinel).
var (
	// ErrApplyFailed is docker compose up or down exiting non-zero or not running at all.
	ErrApplyFailed error = sentinel.New(codes.ApplyFailed, "docker compose failed")
	// ErrCommandFailed is ps, logs or docker version failing or printing output that
	// cannot be read. It has no code of its own: what it says of the release or the
	// box is its cause's (the agent's table calls a cause of no code UNCLASSIFIED).
	ErrCommandFailed = errors.New("docker command failed")
	// ErrUnhealthy is a service that is unhealthy, exited non-zero or restarts.
	ErrUnhealthy error = sentinel.New(codes.Unhealthy, "services unhealthy")
	// ErrHealthTimeout is services still not ready when the health wait times out.
	ErrHealthTimeout error = sentinel.New(codes.HealthTimeout, "services not ready before the health timeout")
	// ErrDockerUnavailable is a docker daemon that cannot be reached: docker said it
	// cannot connect, or the Engine API found no daemon at its socket. A fault of the
	// box, not of the release.
	ErrDockerUnavailable error = sentinel.New(codes.DockerUnavailable, "the docker daemon cannot be reached: is dockerd running? systemctl status docker")
	// ErrImageMissing is an image pull that failed because the registry has no such
	// image or tag, denies it to this box, or has none for its platform: a fault of
	// the release's image reference, or of the box's registry login.
	ErrImageMissing error = sentinel.New(codes.ImageMissing, "the image is not in its registry, or the registry denies it to this box")
	// ErrRegistryUnavailable is an image pull that failed for any other reason: the
	// registry or the network (unreachable, timed out, 5xx, rate limited). Temporary.
	ErrRegistryUnavailable error = sentinel.New(codes.RegistryUnavailable, "the image registry cannot be reached")
)

// Error is the error type of this package.
type Error struct {
	// Op is the operation: "up", "down", "ps", "logs", "version", "wait", "pull" or
	// "image inspect".
	Op string
	// Kind is the sentinel the error matches: ErrApplyFailed, ErrCommandFailed,
	// ErrUnhealthy, ErrHealthTimeout, ErrDockerUnavailable, ErrImageMissing or
	// ErrRegistryUnavailable.
	Kind error
	// Services names the services at fault, sorted (health errors).
	Services []string
	// Detail says what is wrong with each service, e.g. "web: unhealthy".
	Detail string
	// ExitCode is docker's exit code, or -1 when it did not exit by itself.
	ExitCode int
	// Err is the underlying cause, if any.
	Err error
}

// Error describes the failure without any output of docker.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "compose %s: %v", e.Op, e.Kind)
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	} else if len(e.Services) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(e.Services, ", "))
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of this error.
func (e *Error) Is(target error) bool { return target != nil && target == e.Kind }

// Code returns the stable code of the error: codes.DockerUnavailable when its cause is
// a daemon that cannot be reached, whatever the Kind (the box's fault beats the
// step's); otherwise the code of its Kind: codes.ApplyFailed, codes.Unhealthy,
// codes.HealthTimeout, codes.DockerUnavailable, codes.ImageMissing or
// codes.RegistryUnavailable; "" for ErrCommandFailed, which has none.
func (e *Error) Code() codes.Code {
	if errors.Is(e.Err, ErrDockerUnavailable) {
		return codes.DockerUnavailable
	}
	code, _ := sentinel.CodeOf(e.Kind)
	return code
}

// daemonDownMarks are what the docker CLI (and compose, through its client) prints
// when it cannot reach the daemon.
var daemonDownMarks = []string{
	"Cannot connect to the Docker daemon",
	"Is the docker daemon running?",
	"error during connect",
}

// daemonDown reports whether docker's output says it could not reach the daemon.
func daemonDown(out []byte) bool {
	for _, m := range daemonDownMarks {
		if bytes.Contains(out, []byte(m)) {
			return true
		}
	}
	return false
}

// failureCause is err, marked with ErrDockerUnavailable when docker's output says
// the daemon could not be reached.
func failureCause(err error, out []byte) error {
	if daemonDown(out) {
		return fmt.Errorf("%w: %w", ErrDockerUnavailable, err)
	}
	return err
}
