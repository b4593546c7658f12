package deployd

import (
	"context"
	"errors"
	"fmt"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// Exit codes: the contract with the systemd timer and with `run --loop` (docs/OPERATIONS.md, "Exit codes").
const (
	// ExitOK: applied, nothing to do, or down.
	ExitOK = 0
	// ExitFailed: a refusal, a failed apply, a bad config, unauthenticated.
	ExitFailed = 1
	// ExitTemporary: network, 5xx, 429, OpenBao sealed or unreachable, lock held.
	// The unit treats it as success (SuccessExitStatus=75); the next tick retries.
	ExitTemporary = 75
	// ExitEnvMismatch: AGENT_ENV_MISMATCH. Never retried.
	ExitEnvMismatch = 78
)

var (
	// ErrLocked: another run holds the lock; the tick exits 75 at once.
	ErrLocked = errors.New("another monky-deployd run holds the lock")
	// ErrEnvMismatch: tenancy answered AGENT_ENV_MISMATCH, now or at an earlier run
	// (the latch). The tick exits 78 and is never retried.
	ErrEnvMismatch = errors.New(string(codes.AgentEnvMismatch))
	// ErrNoCredentials: no OpenBao token and no bootstrap grant.
	ErrNoCredentials = errors.New("no OpenBao token and no bootstrap grant")
)

// Error is a tick failure with its stable code. Op says what the agent was doing.
type Error struct {
	Op   string
	Code codes.Code
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s: %s", e.Op, e.Code)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

type coder interface{ Code() codes.Code }

// CodeOf returns the stable code carried by err: a bundle refusal code, a code of the
// tenancy or OpenBao client, or one of the agent's own. A cause that is the box's
// wins over the code of the step that met it: a write that found no space is
// DISK_FULL, a docker daemon that cannot be reached DOCKER_UNAVAILABLE, whatever
// step failed. It is "" for nil and codes.ApplyFailed for an error with no code.
func CodeOf(err error) codes.Code {
	if err == nil {
		return ""
	}
	if code := boxCause(err); code != "" {
		return code
	}
	var ae *Error
	if errors.As(err, &ae) && ae.Code != "" {
		return ae.Code
	}
	var c coder
	if errors.As(err, &c) {
		if code := c.Code(); code != "" {
			return code
		}
	}
	return codes.ApplyFailed
}

// ExitCode maps the error of a tick onto the exit code contract: nil is 0, an env
// mismatch 78, a temporary condition 75, anything else 1.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrEnvMismatch), errors.Is(err, tenancy.ErrEnvMismatch):
		return ExitEnvMismatch
	case IsTemporary(err):
		return ExitTemporary
	default:
		return ExitFailed
	}
}

// IsTemporary reports whether err is worth retrying at the next tick: the lock is
// held, state.json cannot be read, tenancy or OpenBao is unreachable, answers 5xx or
// 429, or OpenBao is sealed.
func IsTemporary(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrLocked) || errors.Is(err, fsutil.ErrLocked) || errors.Is(err, ErrStateUnreadable) {
		return true
	}
	// A tick stopped by a signal or a caller's deadline is resumed by the next one.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// A registry that cannot be reached for the pull before the lease: no lease was
	// spent, the next tick pulls again. A docker command that did not finish by
	// itself (a bound of the agent's, a signal it did not send): the box is slow.
	if errors.Is(err, compose.ErrRegistryUnavailable) || errors.Is(err, compose.ErrDockerTimeout) {
		return true
	}
	return tenancy.IsTemporary(err) || bao.IsTemporary(err)
}
