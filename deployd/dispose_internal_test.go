package deployd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
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
		{"the box's own disk", &Error{Op: "download", Code: codes.StateUnavailable, Err: errors.New("EIO")}, false, false, disposition{}, ExitFailed},
		{"staging failed", &Error{Op: "stage", Code: codes.ApplyFailed, Err: errors.New("ENOSPC")}, false, false, remember, ExitFailed},
		{"compose up failed after promote", &Error{Op: "apply", Code: codes.ApplyFailed, Err: errors.New("exit 1")}, false, true, restore, ExitFailed},
		{"unhealthy after promote", &Error{Op: "health", Code: codes.Unhealthy, Err: errors.New("web")}, false, true, restore, ExitFailed},
		{"a down that failed", &Error{Op: "compose down", Code: codes.ApplyFailed, Err: errors.New("exit 1")}, true, false, report, ExitFailed},
		{"stopped", &Error{Op: "tick stopped", Code: codes.Interrupted, Err: context.Canceled}, false, true, disposition{}, ExitTemporary},
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
