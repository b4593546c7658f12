package deployd

import (
	"fmt"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/sentinel"
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

// The agent's own conditions, each with its stable code (internal/sentinel).
var (
	// ErrLocked: another run holds the lock (LOCKED); the tick exits 75 at once.
	ErrLocked = sentinel.New(codes.Locked, "another monky-deployd run holds the lock")
	// ErrEnvMismatch: tenancy answered AGENT_ENV_MISMATCH, now or at an earlier run
	// (the latch). The tick exits 78 and is never retried.
	ErrEnvMismatch = sentinel.New(codes.AgentEnvMismatch, string(codes.AgentEnvMismatch))
	// ErrNoCredentials: no OpenBao token and no bootstrap grant (UNAUTHENTICATED).
	ErrNoCredentials = sentinel.New(codes.Unauthenticated, "no OpenBao token and no bootstrap grant")
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
