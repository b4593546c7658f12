// Package contract holds the numbers the agent promises to what runs it: its version,
// the exit codes of a tick (docs/OPERATIONS.md, "Exit codes") and how long its OpenBao
// token may go without a lookup. Package deployd re-exports the version and the exit
// codes; the timer's idle tick (cmd/monky-deployd-tick) links only this package.
package contract

import "time"

// Version is the agent's version. deployd.Version, DEFAULT_VERSION in
// packaging/install.sh and the newest release in CHANGELOG.md agree; a test checks it.
const Version = "0.1.0"

// Exit codes: the contract with the systemd timer and with `run --loop`.
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

// MaxLookupGap is the longest the OpenBao token goes without a lookup:
// bao.TokenInfo.LookupDue never sets token_renew_at further ahead, and the tick binary
// trusts no token_renew_at beyond it.
const MaxLookupGap = 24 * time.Hour
