package deployd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/engine"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// TestDispose is the table of what a failed step means: its code (classify), whether
// it is reported, how long its sha is held, whether a promoted release is restored,
// and the exit code.
func TestDispose(t *testing.T) {
	refused := func(codes ...codes.Code) error {
		r := &bundle.RefusedError{}
		for _, c := range codes {
			r.Refusals = append(r.Refusals, bundle.Refusal{Code: c, Detail: "x"})
		}
		return &Error{Op: "bundle refused", Err: refusalList{r}}
	}
	report := disposition{report: true}
	netErr := func(op, call string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp", Err: &os.SyscallError{Syscall: call, Err: errno}}
	}
	held := disposition{report: true, hold: holdUntilRetry}
	tests := []struct {
		name     string
		err      error
		down     bool
		promoted bool
		code     codes.Code
		want     disposition
		exit     int
	}{
		{"a refusal", refused(codes.Privileged, codes.DiskLow), false, false, codes.Privileged, held, ExitFailed},
		{"a refusal after DISK_LOW: the bundle's refusal speaks", refused(codes.DiskLow, codes.Privileged), false, false, codes.Privileged, held, ExitFailed},
		{"DISK_LOW alone: a refusal of the box", refused(codes.DiskLow), false, false, codes.DiskLow, report, ExitFailed},
		{"a signature refusal", refused(codes.SignatureUnknownKey), false, false, codes.SignatureUnknownKey, report, ExitFailed},
		{"a sha that failed before", &repeatedError{sha: "ab", f: Failure{Code: codes.Unhealthy}}, false, false, codes.Unhealthy, report, ExitFailed},
		{"tenancy unavailable", &Error{Op: "lease", Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrUnavailable}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"tenancy timed out", &Error{Op: "check-in", Err: &tenancy.APIError{Op: "checkin", Kind: tenancy.ErrUnavailable, Err: context.DeadlineExceeded}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"tenancy refused the connection", &Error{Op: "check-in", Err: &tenancy.APIError{Op: "checkin", Kind: tenancy.ErrUnavailable, Err: netErr("dial", "connect", syscall.ECONNREFUSED)}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"tenancy reset the connection", &Error{Op: "lease", Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrUnavailable, Err: netErr("read", "read", syscall.ECONNRESET)}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"a truncated bundle", &Error{Op: "download", Err: &tenancy.APIError{Op: "bundle", Status: 200, Kind: tenancy.ErrUnavailable, Err: io.ErrUnexpectedEOF}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"rate limited", &Error{Op: "lease", Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrRateLimited}}, false, false, codes.RateLimited, disposition{}, ExitTemporary},
		{"rate limited with a Retry-After", &Error{Op: "report", Err: &tenancy.APIError{Op: "report", Status: 429, Kind: tenancy.ErrRateLimited, RetryAfter: time.Minute}}, false, false, codes.RateLimited, disposition{}, ExitTemporary},
		{"tenancy broke the contract", &Error{Op: "check-in", Err: &tenancy.APIError{Op: "checkin", Kind: tenancy.ErrProtocol}}, false, false, codes.TenancyProtocol, disposition{}, ExitTemporary},
		{"tenancy refused the bearer", &Error{Op: "lease", Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrUnauthenticated}}, false, false, codes.Unauthenticated, disposition{}, ExitFailed},
		{"env mismatch", &Error{Op: "report", Err: &tenancy.APIError{Op: "report", Kind: tenancy.ErrEnvMismatch}}, false, true, codes.AgentEnvMismatch, disposition{}, ExitEnvMismatch},
		{"a lease of AppRole shape", &Error{Op: "lease", Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrLeaseShape}}, false, false, codes.LeaseShape, held, ExitFailed},
		{"a signature longer than the cap", &Error{Op: "signature", Err: &tenancy.APIError{Op: "signature", Kind: tenancy.ErrSignatureTooLarge}}, false, false, codes.SignatureInvalid, report, ExitFailed},
		{"the bundle's writer failed: no code of tenancy's", &Error{Op: "download", Err: fmt.Errorf("tenancy: bundle ab: writing the bundle: %w", errors.New("disk full"))}, false, false, codes.Unclassified, report, ExitFailed},
		{"OpenBao sealed", &Error{Op: "login", Err: &bao.Error{Op: "login", Kind: bao.ErrUnavailable}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"OpenBao timed out", &Error{Op: "login", Err: &bao.Error{Op: "lookup-self", Kind: bao.ErrUnavailable, Err: context.DeadlineExceeded}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"OpenBao refused the connection", &Error{Op: "login", Err: &bao.Error{Op: "lookup-self", Kind: bao.ErrUnavailable, Err: netErr("dial", "connect", syscall.ECONNREFUSED)}}, false, false, codes.Unavailable, disposition{}, ExitTemporary},
		{"OpenBao refused the lease's grant (superseded)", &Error{Op: "login", Err: &bao.Error{Op: "login", Kind: bao.ErrUnauthenticated}}, false, false, codes.Unauthenticated, report, ExitFailed},
		{"a missing secret: held an hour", &Error{Op: "read secrets", Err: &bao.Error{Op: "read", Kind: bao.ErrSecretMissing}}, false, false, codes.SecretMissing, disposition{report: true, hold: time.Hour}, ExitFailed},
		{"a denied secret: held an hour", &Error{Op: "read secrets", Err: &bao.Error{Op: "read", Kind: bao.ErrSecretDenied}}, false, false, codes.SecretDenied, disposition{report: true, hold: time.Hour}, ExitFailed},
		{"the box's own disk", &Error{Op: "download", Err: &fs.PathError{Op: "open", Path: "x", Err: syscall.EIO}}, false, false, codes.StateUnavailable, report, ExitFailed},
		{"promote could not swap current", &Error{Op: "promote", Err: &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.EROFS}}, false, false, codes.StateUnavailable, report, ExitFailed},
		{"a failure of no known code claims nothing", &Error{Op: "stage", Err: errors.New("a file of the bundle")}, false, false, codes.Unclassified, report, ExitFailed},
		{"a docker ps that failed claims nothing either", &Error{Op: "health", Err: &compose.Error{Op: "ps", Kind: compose.ErrCommandFailed, Err: errors.New("exit status 1")}}, false, true, codes.Unclassified, disposition{report: true, restore: true}, ExitFailed},
		{"staging found no space", &Error{Op: "stage", Err: &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}}, false, false, codes.DiskFull, report, ExitFailed},
		{"the download found no space", &Error{Op: "download", Err: fmt.Errorf("copy: %w", syscall.ENOSPC)}, false, false, codes.DiskFull, report, ExitFailed},
		{"the token found no quota", &Error{Op: "write token", Code: codes.StateUnavailable, Err: syscall.EDQUOT}, false, false, codes.DiskFull, report, ExitFailed},
		{"docker down at compose up, after promote", &Error{Op: "compose up", Err: &compose.Error{Op: "up", Kind: compose.ErrApplyFailed, Err: fmt.Errorf("%w: exit 1", compose.ErrDockerUnavailable)}}, false, true, codes.DockerUnavailable, disposition{report: true, restore: true}, ExitFailed},
		{"docker down in the health wait", &Error{Op: "health", Err: &compose.Error{Op: "wait", Kind: compose.ErrDockerUnavailable}}, false, true, codes.DockerUnavailable, disposition{report: true, restore: true}, ExitFailed},
		{"docker down before the lease", &Error{Op: "docker before the lease", Code: codes.DockerUnavailable, Err: errors.New("no socket")}, false, false, codes.DockerUnavailable, report, ExitFailed},
		{"the Engine API's unreachable daemon", &Error{Op: "health", Err: &engine.Error{Op: "containers", Err: engine.ErrUnreachable}}, false, true, codes.DockerUnavailable, disposition{report: true, restore: true}, ExitFailed},
		{"a down that found docker down", &Error{Op: "compose down", Err: &compose.Error{Op: "down", Kind: compose.ErrApplyFailed, Err: fmt.Errorf("%w: exit 1", compose.ErrDockerUnavailable)}}, true, false, codes.DockerUnavailable, report, ExitFailed},
		{"compose up failed after promote", &Error{Op: "compose up", Err: &compose.Error{Op: "up", Kind: compose.ErrApplyFailed, Err: errors.New("exit 1")}}, false, true, codes.ApplyFailed, disposition{report: true, hold: holdUntilRetry, restore: true}, ExitFailed},
		{"unhealthy after promote", &Error{Op: "health", Err: &compose.Error{Op: "wait", Kind: compose.ErrUnhealthy}}, false, true, codes.Unhealthy, disposition{report: true, hold: holdUntilRetry, restore: true}, ExitFailed},
		{"a down that failed", &Error{Op: "compose down", Err: &compose.Error{Op: "down", Kind: compose.ErrApplyFailed, Err: errors.New("exit 1")}}, true, false, codes.ApplyFailed, report, ExitFailed},
		{"stopped", &Error{Op: "tick stopped", Code: codes.Interrupted, Err: context.Canceled}, false, true, codes.Interrupted, disposition{}, ExitTemporary},
		{"a cancelled call", &Error{Op: "login", Err: context.Canceled}, false, false, codes.Interrupted, disposition{}, ExitTemporary},
		{"compose up killed by a signal the agent did not send, after promote", &Error{Op: "compose up", Err: &compose.Error{Op: "up", Kind: compose.ErrApplyFailed, ExitCode: -1,
			Err: fmt.Errorf("%w: docker was killed by signal 9 (killed)", compose.ErrDockerTimeout)}}, false, true, codes.DockerTimeout, disposition{}, ExitTemporary},
		{"a pull killed at its timeout", &Error{Op: "pull web", Err: &compose.Error{Op: "pull", Kind: compose.ErrDockerTimeout, ExitCode: -1,
			Err: fmt.Errorf("%w: killed: %w", compose.ErrDockerTimeout, context.DeadlineExceeded)}}, false, false, codes.DockerTimeout, disposition{}, ExitTemporary},
		{"docker too slow to answer before the lease", &Error{Op: "docker before the lease", Err: &engine.Error{Op: "version", Err: engine.ErrTimeout}}, false, false, codes.DockerTimeout, disposition{}, ExitTemporary},
		{"a pull the box's docker could not store", &Error{Op: "pull web", Err: &compose.Error{Op: "pull", Kind: compose.ErrPullFailed, ExitCode: 1, Err: errors.New("exit status 1")}}, false, false, codes.PullFailed, report, ExitFailed},
		{"a pull that met a full data root", &Error{Op: "pull web", Err: &compose.Error{Op: "pull", Kind: compose.ErrPullFailed, ExitCode: 1, Err: fmt.Errorf("%w: exit status 1", syscall.ENOSPC)}}, false, false, codes.DiskFull, report, ExitFailed},
		{"waiting for tenancy's Retry-After", &waitError{code: codes.RateLimited, until: time.Now()}, false, false, codes.RateLimited, disposition{}, ExitTemporary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &tick{down: tt.down, promoted: tt.promoted}
			assert.Equal(t, tt.code, CodeOf(tt.err), "code")
			assert.Equal(t, tt.want, tk.dispose(tt.err))
			assert.Equal(t, tt.exit, ExitCode(tt.err), "exit code")
			assert.Equal(t, tt.exit == ExitTemporary, IsTemporary(tt.err))
		})
	}
	assert.Empty(t, CodeOf(nil))
	assert.Equal(t, ExitOK, ExitCode(nil))
	assert.False(t, IsTemporary(nil))
}

// TestRepeatedErrorCarriesTheRememberedCode: a failure told again keeps its code.
func TestRepeatedErrorCarriesTheRememberedCode(t *testing.T) {
	err := &repeatedError{sha: fmt.Sprintf("%064d", 7), f: Failure{Code: codes.Unhealthy, Detail: "web: unhealthy"}}
	assert.Equal(t, codes.Unhealthy, CodeOf(err))
	assert.Contains(t, err.Error(), "failed before on this box (UNHEALTHY): web: unhealthy")
}

// TestEveryCodeHasARule: the table names every code of the vocabulary with a fault,
// a next step of its own (NextStep's; not the generic one) and a hold that its fault
// allows: only the bundle's faults hold a sha. A code added without a rule fails here.
func TestEveryCodeHasARule(t *testing.T) {
	steps := map[string]codes.Code{}
	for _, c := range codes.All() {
		r, ok := rules[c]
		if !assert.True(t, ok, "%s has no rule in the table", c) {
			continue
		}
		assert.NotEqual(t, "unknown", r.fault.String(), c)
		assert.NotEmpty(t, r.next, c)
		assert.Equal(t, r.next, NextStep(c), c)
		assert.NotEqual(t, NextStepUnknown, r.next, "%s has no next step of its own", c)
		assert.Equal(t, strings.TrimSpace(r.next), r.next, c)
		assert.NotContains(t, r.next, "\n", c)
		if other, dup := steps[r.next]; dup {
			t.Errorf("%s and %s share one next step", c, other)
		}
		steps[r.next] = c
		if r.fault != faultBundle {
			assert.Zero(t, r.hold, "%s is not the bundle's and holds no sha", c)
		} else {
			assert.NotZero(t, r.hold, "%s is the bundle's and holds its sha", c)
		}
	}
	assert.Len(t, rules, len(codes.All()), "the table holds no code the vocabulary lacks")
	assert.Equal(t, rules[codes.Unclassified], ruleOf("NOT_A_CODE"), "a code the table does not know claims nothing")
	assert.Equal(t, NextStepUnknown, NextStep("NOT_A_CODE"))
	assert.Contains(t, NextStepUnknown, "journalctl -u monky-deployd")
	assert.Empty(t, NextStep(""), "no code, nothing to do")
}

// TestOperationsTableIsTheRules: the table of docs/OPERATIONS.md ("What each code
// means") is rendered from rules; `go test ./deployd/ -update` rewrites it.
func TestOperationsTableIsTheRules(t *testing.T) {
	p := filepath.Join("..", "docs", "OPERATIONS.md")
	doc, err := os.ReadFile(p)
	require.NoError(t, err)
	re := regexp.MustCompile(`(?s)(<!-- BEGIN rules: rendered from deployd/failure.go by TestOperationsTableIsTheRules -->\n).*?(<!-- END rules -->)`)
	require.Regexp(t, re, string(doc), "docs/OPERATIONS.md lost the markers of the rules table")
	want := re.ReplaceAllString(string(doc), "${1}"+strings.ReplaceAll(rulesTable(), "$", "$$")+"${2}")
	if golden.Update() {
		require.NoError(t, os.WriteFile(p, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, string(doc), "docs/OPERATIONS.md's rules table differs from deployd/failure.go: go test ./deployd/ -run TestOperationsTableIsTheRules -update")
}

// rulesTable renders rules as the markdown table of docs/OPERATIONS.md, in the order
// of codes.All.
func rulesTable() string {
	var b strings.Builder
	b.WriteString("| code | whose | exit | reported | sha held | after promote | tried again | next step |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range codes.All() {
		r := rules[c]
		whose, reported, restored, again := r.fault.String(), "yes", "restored", "the next tick, by itself"
		switch r.fault {
		case faultTemporary:
			reported, restored, again = "no", "left as it is: the next tick resumes", "the next tick (not before tenancy's Retry-After, if it sent one)"
		case faultTenancy:
			reported, restored, again = "no", "—", "never: latched until env_id changes or a bootstrap succeeds"
		case faultBundle:
			again = "when tenancy asks with retry, or publishes another sha"
			if r.hold > 0 {
				again = fmt.Sprintf("by itself, %s after the failure", r.hold)
			}
		}
		if c == codes.Unauthenticated {
			whose += " (tenancy's when tenancy refused the token: not reported)"
		}
		held := "no"
		switch {
		case r.hold == holdUntilRetry:
			held = "until retry"
		case r.hold > 0:
			held = r.hold.String()
		}
		fmt.Fprintf(&b, "| `%s` | %s | %d | %s | %s | %s | %s | %s |\n", c, whose, r.exit(c), reported, held, restored, again,
			strings.ReplaceAll(r.next, "|", `\|`))
	}
	return b.String()
}
