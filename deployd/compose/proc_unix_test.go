//go:build unix

package compose

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
