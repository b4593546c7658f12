package compose

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/errtext"
)

// The conditions of this package, each with its stable code (codes.Code.Sentinel).
var (
	// ErrApplyFailed is docker compose up or down exiting non-zero or not running at all.
	ErrApplyFailed error = codes.ApplyFailed.Sentinel("docker compose failed")
	// ErrCommandFailed is ps, logs or docker version failing or printing output that
	// cannot be read. It has no code of its own: what it says of the release or the
	// box is its cause's (the agent's table calls a cause of no code UNCLASSIFIED).
	ErrCommandFailed = errors.New("docker command failed")
	// ErrUnhealthy is a service that is unhealthy, exited non-zero or restarts.
	ErrUnhealthy error = codes.Unhealthy.Sentinel("services unhealthy")
	// ErrHealthTimeout is services still not ready when the health wait times out.
	ErrHealthTimeout error = codes.HealthTimeout.Sentinel("services not ready before the health timeout")
	// ErrDockerUnavailable is a docker daemon that cannot be reached: docker said it
	// cannot connect, or the Engine API found no daemon at its socket. A fault of the
	// box, not of the release.
	ErrDockerUnavailable error = codes.DockerUnavailable.Sentinel("the docker daemon cannot be reached: is dockerd running? systemctl status docker")
	// ErrImageMissing is an image pull that failed because the registry has no such
	// image or tag, denies it to this box, or has none for its platform: a fault of
	// the release's image reference, or of the box's registry login.
	ErrImageMissing error = codes.ImageMissing.Sentinel("the image is not in its registry, or the registry denies it to this box")
	// ErrRegistryUnavailable is an image pull that failed for the registry or the
	// network, by what the daemon said (registryDownMarks: refused, DNS, TLS, timed
	// out, 5xx, rate limited). Temporary.
	ErrRegistryUnavailable error = codes.RegistryUnavailable.Sentinel("the image registry cannot be reached")
	// ErrPullFailed is an image pull that docker ended non-zero for a reason that is
	// neither the image's (ErrImageMissing), the registry's or the network's
	// (ErrRegistryUnavailable), a daemon that cannot be reached nor a full disk: the
	// box's docker could not store or unpack the image, or could not run. The box's
	// fault, not the release's.
	ErrPullFailed error = codes.PullFailed.Sentinel("docker could not pull the image")
	// ErrDockerTimeout is a docker command that did not exit by itself: the agent
	// killed it when a bound of its own passed (a pull's, a read's), or a signal the
	// agent did not send killed it (the OOM killer). The box is slow or docker hangs;
	// the release is not at fault. It is the Kind of a pull's Error and the cause
	// (Err) of the other commands' (Output.Stop says which way it ended).
	ErrDockerTimeout error = codes.DockerTimeout.Sentinel("docker did not finish by itself")
)

// Error is the error type of this package.
type Error struct {
	// Op is the operation: "up", "down", "ps", "logs", "version", "wait", "pull" or
	// "image inspect".
	Op string
	// Kind is the sentinel the error matches: ErrApplyFailed, ErrCommandFailed,
	// ErrUnhealthy, ErrHealthTimeout, ErrDockerUnavailable, ErrImageMissing,
	// ErrRegistryUnavailable, ErrPullFailed or ErrDockerTimeout.
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

// Error describes the failure without any output of docker: "compose <op>: <kind>:
// <detail>: <cause>", the services at fault standing for an empty detail, the empty
// parts left out.
func (e *Error) Error() string {
	return errtext.Join(errtext.Words("compose", e.Op), errtext.Cause(e.Kind),
		cmp.Or(e.Detail, strings.Join(e.Services, ", ")), errtext.Cause(e.Err))
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of this error.
func (e *Error) Is(target error) bool { return target != nil && target == e.Kind }

// Code returns the stable code of the error. A cause of the box's beats the step's
// code, whatever the Kind: codes.DockerUnavailable for a daemon that cannot be
// reached, codes.DiskFull for no space or inodes left (ENOSPC, EDQUOT),
// codes.DockerTimeout for docker that did not finish by itself (ErrDockerTimeout),
// codes.Interrupted for docker the agent killed because its caller cancelled the
// context. Otherwise the code of its Kind ("" for ErrCommandFailed, which has none).
func (e *Error) Code() codes.Code {
	switch {
	case errors.Is(e.Err, ErrDockerUnavailable):
		return codes.DockerUnavailable
	case errors.Is(e.Err, syscall.ENOSPC), errors.Is(e.Err, syscall.EDQUOT):
		return codes.DiskFull
	case errors.Is(e.Err, ErrDockerTimeout):
		return codes.DockerTimeout
	case errors.Is(e.Err, context.Canceled):
		return codes.Interrupted
	}
	return codes.Of(e.Kind)
}

// daemonDownMarks are what the docker CLI (and compose, through its client) prints
// when it cannot reach the daemon.
var daemonDownMarks = []string{
	"Cannot connect to the Docker daemon",
	"Is the docker daemon running?",
	"error during connect",
	// docker's socket refuses this user (EACCES on the socket).
	"while trying to connect to the Docker daemon socket",
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
