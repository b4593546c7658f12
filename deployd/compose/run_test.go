package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
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

func TestTailBuffer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		limit       int
		writes      []string
		want        string
		wantDropped int64
	}{
		{name: "nothing", limit: 4, want: ""},
		{name: "under the limit", limit: 8, writes: []string{"ab", "cd"}, want: "abcd"},
		{name: "exactly the limit", limit: 4, writes: []string{"ab", "cd"}, want: "abcd"},
		{name: "one big write", limit: 4, writes: []string{"abcdefgh"}, want: "efgh", wantDropped: 4},
		{name: "many small writes", limit: 4, writes: []string{"ab", "cd", "ef", "gh", "ij"}, want: "ghij", wantDropped: 6},
		{name: "big after small", limit: 4, writes: []string{"ab", "cdefgh"}, want: "efgh", wantDropped: 4},
		{name: "small after big", limit: 4, writes: []string{"abcdef", "g"}, want: "defg", wantDropped: 3},
		{name: "limit one", limit: 1, writes: []string{"a", "b", "c"}, want: "c", wantDropped: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTailBuffer(tc.limit)
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			got, dropped := b.snapshot()
			assert.Equal(t, tc.want, string(got))
			assert.Equal(t, tc.wantDropped, dropped)
		})
	}
}

// TestTailBufferBounded: a chatty writer never grows the buffer past 2×limit, and
// the tail is always the last bytes written.
func TestTailBufferBounded(t *testing.T) {
	const limit = 1000
	b := newTailBuffer(limit)
	var all bytes.Buffer
	for i := range 5000 {
		line := strings.Repeat(string(rune('a'+i%26)), i%37) + "\n"
		all.WriteString(line)
		_, _ = b.Write([]byte(line))
		require.LessOrEqual(t, len(b.buf), 2*limit)
	}
	got, dropped := b.snapshot()
	assert.Equal(t, all.Bytes()[all.Len()-limit:], got)
	assert.Equal(t, int64(all.Len()-limit), dropped)
	assert.LessOrEqual(t, cap(b.buf), 4*limit, "append growth stays bounded")
}

func TestCapBuffer(t *testing.T) {
	c := &capBuffer{max: 4}
	_, err := c.Write([]byte("abc"))
	require.NoError(t, err)
	_, err = c.Write([]byte("de"))
	require.ErrorIs(t, err, errTooMuchOutput)
	assert.True(t, c.overflow)
	assert.Equal(t, "abc", string(c.buf))
}

// TestLineLog: docker's output reaches the log one line at a time, whatever the
// chunks it comes in; \r (a progress redraw) ends a line too; blank lines are
// skipped, long lines cut, and past maxLoggedLines lines are only counted.
func TestLineLog(t *testing.T) {
	for _, c := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"whole lines", []string{"Pulling web\n", "web Pulled\n"}, []string{"Pulling web", "web Pulled"}},
		{"split mid-line", []string{"Con", "tainer web  Start", "ed\nlast"}, []string{"Container web  Started", "last"}},
		{"carriage returns", []string{"a 1%\ra 50%\ra 100%\r\n"}, []string{"a 1%", "a 50%", "a 100%"}},
		{"blank lines", []string{"\n\n  \nx\n"}, []string{"x"}},
		{"a long line is cut", []string{strings.Repeat("é", 400) + "\n"}, []string{strings.Repeat("é", 256)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := newLineLog(slog.New(slog.NewJSONHandler(&buf, nil)), "docker compose up")
			for _, ch := range c.chunks {
				n, err := l.Write([]byte(ch))
				require.NoError(t, err)
				assert.Equal(t, len(ch), n)
			}
			l.flush()
			assert.Equal(t, c.want, outputs(t, &buf))
		})
	}
	t.Run("capped", func(t *testing.T) {
		var buf bytes.Buffer
		l := newLineLog(slog.New(slog.NewJSONHandler(&buf, nil)), "docker compose up")
		_, _ = l.Write([]byte(strings.Repeat("line\n", maxLoggedLines+7)))
		l.flush()
		assert.Len(t, outputs(t, &buf), maxLoggedLines)
		assert.Contains(t, buf.String(), `"lines_not_logged":7`)
	})
}

func outputs(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if s, ok := rec["output"].(string); ok {
			assert.Equal(t, "docker compose up", rec["msg"])
			got = append(got, s)
		}
	}
	return got
}
