//go:build unix

package compose

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// testWaitDelay is the wait delay of these tests' clients: the default's 5 s would
// make each of them wait that long.
const testWaitDelay = 300 * time.Millisecond

// lingeringClient is a Client whose docker is script (a shell script's body), with a
// short wait delay, its log in the returned buffer. $HOLD in the script starts a
// child that keeps docker's output open for a minute (killed when the test ends).
func lingeringClient(t *testing.T, script string) (*Client, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	pids := filepath.Join(dir, "holders")
	docker := writeDocker(t, dir, strings.ReplaceAll(script, "$HOLD", "sleep 60 & echo $! >> "+pids))
	t.Cleanup(func() {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	logs := &bytes.Buffer{}
	c, err := New(Config{Docker: docker, Project: "monky", Dir: dir, Env: []string{"PATH=/usr/bin:/bin"},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	c.waitDelay = testWaitDelay
	return c, logs
}

// writeDocker writes a docker that is a shell script (body) to dir and returns its
// path. It writes under syscall.ForkLock, as os/exec forks: a child that another
// test forks meanwhile would inherit the file open for writing, and exec of the
// script would fail with ETXTBSY ("text file busy") while it holds it.
func writeDocker(t *testing.T, dir, body string) string {
	t.Helper()
	docker := filepath.Join(dir, "docker")
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	require.NoError(t, os.WriteFile(docker, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return docker
}

// TestOutputOutlivesDocker: a docker that exits while a child of it holds its output
// open. Its exit status decides: 0 is a success (logged, naming the holder), 1 is
// that exit's failure with what it printed; neither waits for the child.
func TestOutputOutlivesDocker(t *testing.T) {
	t.Parallel()
	t.Run("compose up exits 0", func(t *testing.T) {
		t.Parallel()
		c, logs := lingeringClient(t, "echo 'Container monky-web-1  Started'\n$HOLD\nexit 0")
		start := time.Now()
		out, err := c.Up(t.Context())
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 30*time.Second, "the child is not waited for")
		assert.GreaterOrEqual(t, time.Since(start), testWaitDelay)
		assert.Equal(t, 0, out.ExitCode)
		assert.Empty(t, out.Stop)
		assert.True(t, out.Lingered)
		assert.Contains(t, out.String(), "Container monky-web-1  Started")
		if runtime.GOOS == "linux" {
			require.Len(t, out.HeldBy, 1)
			assert.Regexp(t, `^pid [0-9]+ \(sleep\)$`, out.HeldBy[0])
		}
		assert.Contains(t, logs.String(), "level=WARN msg=\"docker exited 0, but its output stayed open after it exited")
		assert.Contains(t, logs.String(), `command="docker compose up"`)
		assert.Contains(t, logs.String(), "docker compose up done")
	})
	t.Run("compose up exits 1", func(t *testing.T) {
		t.Parallel()
		c, _ := lingeringClient(t, "echo 'Error response from daemon: driver failed programming external connectivity' >&2\n$HOLD\nexit 1")
		out, err := c.Up(t.Context())
		requireDockerError(t, out, err, ErrApplyFailed, codes.ApplyFailed, 1)
		assert.NotErrorIs(t, err, ErrDockerTimeout)
		assert.Empty(t, out.Stop)
		assert.True(t, out.Lingered)
		assert.Contains(t, out.String(), "driver failed programming external connectivity", "the output read before is kept")
		assert.Contains(t, err.Error(), "exit status 1; its output stayed open 300ms after it exited (held by ")
	})
	t.Run("docker pull exits 0", func(t *testing.T) {
		t.Parallel()
		c, logs := lingeringClient(t, "echo 'Status: Downloaded newer image for nginx:1.27'\n$HOLD\nexit 0")
		require.NoError(t, c.Pull(t.Context(), "nginx:1.27", PullOptions{}))
		assert.Contains(t, logs.String(), `command="docker pull"`)
		assert.Contains(t, logs.String(), "pulled the image")
	})
	t.Run("docker pull exits 1", func(t *testing.T) {
		t.Parallel()
		c, _ := lingeringClient(t, "echo 'failed to register layer: lstat /var/lib/docker/overlay2/x: input/output error' >&2\n$HOLD\nexit 1")
		err := c.Pull(t.Context(), "nginx:1.27", PullOptions{})
		require.ErrorIs(t, err, ErrPullFailed)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, codes.PullFailed, e.Code())
		assert.Contains(t, e.Detail, "nginx:1.27: failed to register layer")
	})
	t.Run("docker version exits 0", func(t *testing.T) {
		t.Parallel()
		c, _ := lingeringClient(t, "echo 27.3.1\n$HOLD\nexit 0")
		v, err := c.DockerVersion(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "27.3.1", v)
	})
}

// TestCutOutputIsNotRead: ps and inspect parse their output whole; one that stayed
// open past the wait delay may be cut, so it is an error, never a shorter list.
func TestCutOutputIsNotRead(t *testing.T) {
	t.Parallel()
	c, _ := lingeringClient(t, `echo '{"Name":"monky-web-1","Service":"web","State":"running"}'`+"\n$HOLD\nexit 0")
	_, err := c.PS(t.Context())
	require.ErrorIs(t, err, ErrCommandFailed)
	assert.Contains(t, err.Error(), "its output stayed open after it exited (held by ")
	_, err = c.Inspect(t.Context(), []string{"monky-web-1"})
	require.ErrorIs(t, err, ErrCommandFailed)
}

// slowWriter takes its first write only after a pause: an agent too busy to read
// docker's output in time.
type slowWriter struct {
	pause time.Duration
	once  sync.Once
	buf   bytes.Buffer
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { time.Sleep(w.pause) })
	return w.buf.Write(p)
}

// TestSlowReaderIsNotALinger: docker exited and nothing holds its output, but the
// agent has not read all of it when the wait delay passes: it waits for the rest (one
// more delay) instead of cutting it, and calls nothing held.
func TestSlowReaderIsNotALinger(t *testing.T) {
	t.Parallel()
	c, logs := lingeringClient(t, "echo one\necho two\nexit 0")
	// Wide margins: the reader must be late past one delay and in time for the
	// second, on a loaded machine too.
	c.waitDelay = 2 * time.Second
	w := &slowWriter{pause: 3 * time.Second}
	res := c.run(t.Context(), []string{"version"}, w, w)
	require.NoError(t, res.err)
	assert.False(t, res.lingered)
	assert.Equal(t, "one\ntwo\n", w.buf.String())
	assert.NotContains(t, logs.String(), "stayed open")
}

// TestDockerThatDidNotExit: a docker the agent killed at its own deadline, or that a
// signal killed, is DOCKER_TIMEOUT with ExitCode -1 and says which it was.
func TestDockerThatDidNotExit(t *testing.T) {
	t.Parallel()
	t.Run("the agent's deadline", func(t *testing.T) {
		t.Parallel()
		c, _ := lingeringClient(t, "echo pulling\nexec sleep 60")
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		out, err := c.Up(ctx)
		assert.Less(t, time.Since(start), 30*time.Second)
		requireDockerError(t, out, err, ErrDockerTimeout, codes.DockerTimeout, -1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, StopDeadline, out.Stop)
		assert.Contains(t, out.String(), "pulling", "the output read before is kept")
	})
	t.Run("a pull at its deadline", func(t *testing.T) {
		t.Parallel()
		c, _ := lingeringClient(t, "exec sleep 60")
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err := c.Pull(ctx, "nginx:1.27", PullOptions{})
		require.ErrorIs(t, err, ErrDockerTimeout)
		assert.NotErrorIs(t, err, ErrRegistryUnavailable, "a pull the agent killed says nothing of the registry")
	})
	t.Run("a signal the agent did not send", func(t *testing.T) {
		t.Parallel()
		c, _ := lingeringClient(t, "echo starting\nkill -9 $$")
		out, err := c.Up(t.Context())
		requireDockerError(t, out, err, ErrDockerTimeout, codes.DockerTimeout, -1)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, StopSignal, out.Stop)
		assert.Contains(t, err.Error(), "killed by signal 9 (killed), which the agent did not send")
		assert.Contains(t, out.String(), "starting")
	})
}

// TestCancelKillsProcessGroup: docker runs compose as a child process; cancelling
// must kill that child too, not only docker. The fake docker is one process, so this
// test uses a docker that starts a child of its own.
func TestCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	docker := writeDocker(t, dir, "sleep 60 &\necho $! > "+pidFile+"\nwait")
	c, err := New(Config{Docker: docker, Project: "monky", Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var out Output
	go func() { var err error; out, err = c.Up(ctx); done <- err }()
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, ErrApplyFailed)
		assert.NotErrorIs(t, err, ErrDockerTimeout, "a cancel is not a timeout")
		assert.Equal(t, StopCancelled, out.Stop)
		assert.Equal(t, -1, out.ExitCode)
	case <-time.After(defaultWaitDelay + 5*time.Second):
		t.Fatal("Up did not return after cancel")
	}
	assert.Less(t, time.Since(start), defaultWaitDelay, "no wait for pipes held by a surviving child")
	assert.Eventually(t, func() bool {
		return syscall.Kill(child, 0) == syscall.ESRCH
	}, 5*time.Second, 10*time.Millisecond, "the child of docker was killed with it")
}

// TestEmptyEnvInheritsNothing: an empty Config.Env runs docker with no environment,
// not with the process's (os/exec inherits on a nil Env). Serial: it sets a variable
// of the process environment (t.Setenv).
func TestEmptyEnvInheritsNothing(t *testing.T) {
	t.Setenv("MONKY_PROCESS_ONLY", "leak")
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env.txt")
	docker := writeDocker(t, dir, "/usr/bin/env > "+envFile)
	c, err := New(Config{Docker: docker, Project: "monky", Dir: dir})
	require.NoError(t, err)
	_, err = c.Up(t.Context())
	require.NoError(t, err)
	b, err := os.ReadFile(envFile)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "MONKY_PROCESS_ONLY")
	assert.NotContains(t, string(b), "HOME=")
}
