package deployd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/engine"
)

// TestDispose is the table of what a failed step means: the one place that decides
// report, memory and restore (the exit code follows from the error, ExitCode).
func TestDispose(t *testing.T) {
	refused := func(codes ...codes.Code) error {
		r := &bundle.RefusedError{}
		for _, c := range codes {
			r.Refusals = append(r.Refusals, bundle.Refusal{Code: c, Detail: "x"})
		}
		return &Error{Op: "bundle refused", Code: r.Code(), Err: refusalList{r}}
	}
	report, remember, restore := disposition{report: true}, disposition{report: true, remember: true}, disposition{report: true, remember: true, restore: true}
	tests := []struct {
		name     string
		err      error
		down     bool
		promoted bool
		want     disposition
		exit     int
	}{
		{"a refusal", refused(codes.Privileged, codes.DiskLow), false, false, remember, ExitFailed},
		{"DISK_LOW alone: a refusal of the box", refused(codes.DiskLow), false, false, report, ExitFailed},
		{"a sha that failed before", &repeatedError{sha: "ab", f: Failure{Code: codes.Unhealthy}}, false, false, report, ExitFailed},
		{"tenancy unavailable", &Error{Op: "lease", Code: codes.Unavailable, Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrUnavailable}}, false, false, disposition{}, ExitTemporary},
		{"rate limited", &Error{Op: "lease", Code: codes.RateLimited, Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrRateLimited}}, false, false, disposition{}, ExitTemporary},
		{"tenancy refused the bearer", &Error{Op: "lease", Code: codes.Unauthenticated, Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrUnauthenticated}}, false, false, disposition{}, ExitFailed},
		{"env mismatch", &Error{Op: "report", Code: codes.AgentEnvMismatch, Err: &tenancy.APIError{Op: "report", Kind: tenancy.ErrEnvMismatch}}, false, true, disposition{}, ExitEnvMismatch},
		{"a lease of AppRole shape", &Error{Op: "lease", Code: codes.LeaseShape, Err: &tenancy.APIError{Op: "lease", Kind: tenancy.ErrLeaseShape}}, false, false, remember, ExitFailed},
		{"OpenBao sealed", &Error{Op: "login", Code: codes.Unavailable, Err: &bao.Error{Op: "login", Kind: bao.ErrUnavailable}}, false, false, disposition{}, ExitTemporary},
		{"OpenBao refused the lease's grant (superseded)", &Error{Op: "login", Code: codes.Unauthenticated, Err: &bao.Error{Op: "login", Kind: bao.ErrUnauthenticated}}, false, false, report, ExitFailed},
		{"a missing secret", &Error{Op: "read secrets", Code: codes.SecretMissing, Err: &bao.Error{Op: "read", Kind: bao.ErrSecretMissing}}, false, false, remember, ExitFailed},
		{"the box's own disk", &Error{Op: "download", Code: codes.StateUnavailable, Err: errors.New("EIO")}, false, false, report, ExitFailed},
		{"staging failed", &Error{Op: "stage", Code: codes.ApplyFailed, Err: errors.New("a file of the bundle")}, false, false, remember, ExitFailed},
		{"staging found no space", &Error{Op: "stage", Code: codes.ApplyFailed, Err: &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}}, false, false, report, ExitFailed},
		{"the download found no space", &Error{Op: "download", Code: codes.StateUnavailable, Err: fmt.Errorf("copy: %w", syscall.ENOSPC)}, false, false, report, ExitFailed},
		{"the token found no quota", &Error{Op: "write token", Code: codes.StateUnavailable, Err: syscall.EDQUOT}, false, false, report, ExitFailed},
		{"docker down at compose up, after promote", &Error{Op: "apply", Code: codes.ApplyFailed, Err: &compose.Error{Op: "up", Kind: compose.ErrApplyFailed, Err: fmt.Errorf("%w: exit 1", compose.ErrDockerUnavailable)}}, false, true, disposition{report: true, restore: true}, ExitFailed},
		{"docker down in the health wait", &Error{Op: "health", Code: codes.DockerUnavailable, Err: &compose.Error{Op: "wait", Kind: compose.ErrDockerUnavailable}}, false, true, disposition{report: true, restore: true}, ExitFailed},
		{"docker down before the lease", &Error{Op: "docker before the lease", Code: codes.DockerUnavailable, Err: errors.New("no socket")}, false, false, report, ExitFailed},
		{"a down that found docker down", &Error{Op: "compose down", Code: codes.ApplyFailed, Err: fmt.Errorf("%w: exit 1", compose.ErrDockerUnavailable)}, true, false, report, ExitFailed},
		{"compose up failed after promote", &Error{Op: "apply", Code: codes.ApplyFailed, Err: errors.New("exit 1")}, false, true, restore, ExitFailed},
		{"unhealthy after promote", &Error{Op: "health", Code: codes.Unhealthy, Err: errors.New("web")}, false, true, restore, ExitFailed},
		{"a down that failed", &Error{Op: "compose down", Code: codes.ApplyFailed, Err: errors.New("exit 1")}, true, false, report, ExitFailed},
		{"stopped", &Error{Op: "tick stopped", Code: codes.Interrupted, Err: context.Canceled}, false, true, disposition{}, ExitTemporary},
		{"compose up killed by a signal the agent did not send, after promote", &Error{Op: "apply", Code: codes.ApplyFailed, Err: &compose.Error{Op: "up", Kind: compose.ErrApplyFailed, ExitCode: -1,
			Err: fmt.Errorf("%w: docker was killed by signal 9 (killed)", compose.ErrDockerTimeout)}}, false, true, disposition{}, ExitTemporary},
		{"a pull killed at its timeout", &Error{Op: "pull web", Code: codes.DockerTimeout, Err: &compose.Error{Op: "pull", Kind: compose.ErrDockerTimeout, ExitCode: -1,
			Err: fmt.Errorf("%w: killed: %w", compose.ErrDockerTimeout, context.DeadlineExceeded)}}, false, false, disposition{}, ExitTemporary},
		{"docker too slow to answer before the lease", &Error{Op: "docker before the lease", Code: codes.DockerTimeout, Err: fmt.Errorf("version: %w", context.DeadlineExceeded)}, false, false, disposition{}, ExitTemporary},
		{"a pull the box's docker could not store", &Error{Op: "pull web", Code: codes.PullFailed, Err: &compose.Error{Op: "pull", Kind: compose.ErrPullFailed, ExitCode: 1, Err: errors.New("exit status 1")}}, false, false, report, ExitFailed},
		{"a pull that met a full data root", &Error{Op: "pull web", Code: codes.DiskFull, Err: &compose.Error{Op: "pull", Kind: compose.ErrPullFailed, ExitCode: 1, Err: fmt.Errorf("%w: exit status 1", syscall.ENOSPC)}}, false, false, report, ExitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &tick{down: tt.down, promoted: tt.promoted}
			assert.Equal(t, tt.want, tk.dispose(tt.err))
			assert.Equal(t, tt.exit, ExitCode(tt.err), "exit code")
		})
	}
}

// TestRepeatedErrorCarriesTheRememberedCode: a failure told again keeps its code.
func TestRepeatedErrorCarriesTheRememberedCode(t *testing.T) {
	err := &repeatedError{sha: fmt.Sprintf("%064d", 7), f: Failure{Code: codes.Unhealthy, Detail: "web: unhealthy"}}
	assert.Equal(t, codes.Unhealthy, CodeOf(err))
	assert.Contains(t, err.Error(), "failed before on this box (UNHEALTHY): web: unhealthy")
}

// TestEveryCodeHasAFault: the faults table names every code, and the codes that
// are the box's are never remembered against a sha.
func TestEveryCodeHasAFault(t *testing.T) {
	for _, c := range codes.All() {
		f, ok := faults[c]
		if assert.True(t, ok, "%s has no fault in the table", c) {
			assert.NotEqual(t, "unknown", f.String(), c)
		}
	}
	box := []codes.Code{codes.DiskLow, codes.DiskFull, codes.DockerUnavailable, codes.StateUnavailable, codes.ComposeMissing, codes.ConfigInvalid}
	for _, c := range box {
		t.Run(string(c), func(t *testing.T) {
			err := &Error{Op: "step", Code: c, Err: errors.New("x")}
			assert.Equal(t, faultBox, faultOf(err))
			d := (&tick{promoted: true}).dispose(err)
			assert.Equal(t, disposition{report: true, restore: true}, d, "reported, restored, never remembered")
		})
	}
	assert.Equal(t, codes.DiskFull, CodeOf(&Error{Op: "stage", Code: codes.ApplyFailed, Err: syscall.ENOSPC}), "a box cause wins over the step's code")
	assert.Equal(t, codes.DockerUnavailable, CodeOf(&Error{Op: "apply", Code: codes.ApplyFailed, Err: compose.ErrDockerUnavailable}))
	assert.Equal(t, codes.DockerUnavailable, CodeOf(&engine.Error{Op: "containers", Err: engine.ErrUnreachable}), "the Engine API's unreachable daemon too")
	assert.Equal(t, codes.DockerTimeout, CodeOf(&Error{Op: "apply", Code: codes.ApplyFailed, Err: &compose.Error{Op: "up", Kind: compose.ErrApplyFailed,
		Err: fmt.Errorf("%w: killed by a signal", compose.ErrDockerTimeout)}}), "compose up that did not exit by itself is DOCKER_TIMEOUT, never APPLY_FAILED")
	assert.Equal(t, codes.PullFailed, CodeOf(&compose.Error{Op: "pull", Kind: compose.ErrPullFailed, Err: errors.New("exit status 1")}))
}
