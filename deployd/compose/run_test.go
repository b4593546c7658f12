package compose

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// TestEndingResult: how a local docker command ended decides its outcome, and the
// code an up (or any command of Kind ErrApplyFailed) reports: the exit status
// first, then who killed it.
func TestEndingResult(t *testing.T) {
	exit1 := exitError(t, 1)
	for _, tc := range []struct {
		name string
		e    ending
		code int
		stop Stop
		// is are the conditions the error matches; none for a success.
		is   []error
		isnt []error
		// want is the code of an *Error of Kind ErrApplyFailed with this cause.
		want codes.Code
		msg  string
	}{
		{name: "exit 0", e: ending{exited: true}, code: 0},
		{name: "exit 0, output held past the wait delay", e: ending{exited: true, lingered: true, heldBy: []string{"pid 7 (sleep)"}}, code: 0},
		{name: "exit 0 racing the agent's kill", e: ending{exited: true, killed: true, ctxErr: context.DeadlineExceeded}, code: 0},
		{name: "exit 1", e: ending{exited: true, code: 1, waitErr: exit1}, code: 1,
			is: []error{exit1}, isnt: []error{ErrDockerTimeout, context.Canceled}, want: codes.ApplyFailed},
		{name: "exit 1, output held past the wait delay", e: ending{exited: true, code: 1, waitErr: exit1, lingered: true,
			heldBy: []string{"pid 7 (sleep)"}, delay: 5 * time.Second}, code: 1,
			is: []error{exit1}, isnt: []error{ErrDockerTimeout}, want: codes.ApplyFailed,
			msg: "exit status 1; its output stayed open 5s after it exited (held by pid 7 (sleep))"},
		{name: "exit 1, output held by no process the agent sees", e: ending{exited: true, code: 1, waitErr: exit1, lingered: true, delay: time.Second}, code: 1,
			is: []error{exit1}, want: codes.ApplyFailed, msg: "held by a process /proc does not show to the agent, or none any more"},
		{name: "killed by the agent's deadline", e: ending{killed: true, ctxErr: context.DeadlineExceeded, signal: "signal 9 (killed)"}, code: -1, stop: StopDeadline,
			is: []error{ErrDockerTimeout, context.DeadlineExceeded}, isnt: []error{context.Canceled}, want: codes.DockerTimeout,
			msg: "did not finish within the bound the agent set for it"},
		{name: "killed by an outside signal", e: ending{signal: "signal 9 (killed)"}, code: -1, stop: StopSignal,
			is: []error{ErrDockerTimeout}, isnt: []error{context.DeadlineExceeded, context.Canceled}, want: codes.DockerTimeout,
			msg: "killed by signal 9 (killed), which the agent did not send"},
		{name: "cancelled", e: ending{killed: true, ctxErr: context.Canceled, signal: "signal 9 (killed)"}, code: -1, stop: StopCancelled,
			is: []error{context.Canceled}, isnt: []error{ErrDockerTimeout}, want: codes.Interrupted},
		{name: "died of the pipe the agent closed", e: ending{signal: "signal 13 (broken pipe)", copyErr: errTooMuchOutput}, code: -1,
			is: []error{errTooMuchOutput}, isnt: []error{ErrDockerTimeout}, want: codes.ApplyFailed},
		{name: "exit 0, the agent refused its output", e: ending{exited: true, copyErr: errTooMuchOutput}, code: 0,
			is: []error{errTooMuchOutput}, want: codes.ApplyFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.e.result()
			assert.Equal(t, tc.code, r.code)
			assert.Equal(t, tc.stop, r.stop)
			assert.Equal(t, tc.e.lingered, r.lingered)
			assert.Equal(t, tc.e.heldBy, r.heldBy)
			if len(tc.is) == 0 {
				require.NoError(t, r.err)
				return
			}
			require.Error(t, r.err)
			for _, is := range tc.is {
				assert.ErrorIs(t, r.err, is)
			}
			for _, isnt := range tc.isnt {
				assert.NotErrorIs(t, r.err, isnt)
			}
			assert.Contains(t, r.err.Error(), tc.msg)
			err := &Error{Op: "up", Kind: ErrApplyFailed, ExitCode: r.code, Err: failureCause(r.err, nil)}
			assert.Equal(t, tc.want, err.Code())
		})
	}
}

// exitError is the *exec.ExitError of a program that exits with code.
func exitError(t *testing.T, code int) error {
	t.Helper()
	err := exec.Command("/bin/sh", "-c", fmt.Sprintf("exit %d", code)).Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	return err
}

// TestPullErrorOfAKill: a pull that did not exit by itself is DOCKER_TIMEOUT when the
// agent's bound passed or a signal killed it; a cancelled one stays a cancel.
func TestPullErrorOfAKill(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    ending
		kind error
		code codes.Code
		is   error
	}{
		{"the pull's timeout", ending{killed: true, ctxErr: context.DeadlineExceeded}, ErrDockerTimeout, codes.DockerTimeout, context.DeadlineExceeded},
		{"the OOM killer", ending{signal: "signal 9 (killed)"}, ErrDockerTimeout, codes.DockerTimeout, ErrDockerTimeout},
		{"cancelled", ending{killed: true, ctxErr: context.Canceled}, ErrPullFailed, codes.Interrupted, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pullError("nginx:1.27", tc.e.result(), nil)
			assert.ErrorIs(t, err, tc.kind)
			assert.ErrorIs(t, err, tc.is)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.code, e.Code())
			assert.Equal(t, -1, e.ExitCode)
			assert.Contains(t, err.Error(), "nginx:1.27")
		})
	}
	assert.False(t, errors.Is(pullError("x", ending{exited: true, code: 1, waitErr: exitError(t, 1)}.result(), []byte("Error response from daemon: i/o timeout")), ErrDockerTimeout),
		"a registry that timed out on the daemon's side is the registry's, not a kill")
}
