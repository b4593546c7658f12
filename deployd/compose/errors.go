package compose

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
)

var (
	// ErrApplyFailed is docker compose up or down exiting non-zero or not running at all.
	ErrApplyFailed = errors.New("docker compose failed")
	// ErrCommandFailed is ps, logs or docker version failing or printing output that
	// cannot be read.
	ErrCommandFailed = errors.New("docker command failed")
	// ErrUnhealthy is a service that is unhealthy, exited non-zero or restarts.
	ErrUnhealthy = errors.New("services unhealthy")
	// ErrHealthTimeout is services still not ready when the health wait times out.
	ErrHealthTimeout = errors.New("services not ready before the health timeout")
	// ErrDockerUnavailable is a docker daemon that cannot be reached: docker said it
	// cannot connect, or the Engine API found no daemon at its socket. A fault of the
	// box, not of the release.
	ErrDockerUnavailable = errors.New("the docker daemon cannot be reached: is dockerd running? systemctl status docker")
	// ErrImageMissing is an image pull that failed because the registry has no such
	// image or tag, denies it to this box, or has none for its platform: a fault of
	// the release's image reference, or of the box's registry login.
	ErrImageMissing = errors.New("the image is not in its registry, or the registry denies it to this box")
	// ErrRegistryUnavailable is an image pull that failed for any other reason: the
	// registry or the network (unreachable, timed out, 5xx, rate limited). Temporary.
	ErrRegistryUnavailable = errors.New("the image registry cannot be reached")
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

// Code returns the stable code of the error: codes.ApplyFailed, codes.Unhealthy,
// codes.HealthTimeout, codes.DockerUnavailable, codes.ImageMissing or
// codes.RegistryUnavailable.
func (e *Error) Code() codes.Code {
	switch k := e.Kind; {
	case errors.Is(e.Err, ErrDockerUnavailable):
		return codes.DockerUnavailable
	case errors.Is(k, ErrUnhealthy):
		return codes.Unhealthy
	case errors.Is(k, ErrHealthTimeout):
		return codes.HealthTimeout
	case errors.Is(k, ErrDockerUnavailable):
		return codes.DockerUnavailable
	case errors.Is(k, ErrImageMissing):
		return codes.ImageMissing
	case errors.Is(k, ErrRegistryUnavailable):
		return codes.RegistryUnavailable
	default:
		return codes.ApplyFailed
	}
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
