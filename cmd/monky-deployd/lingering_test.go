package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// The commands a lingering docker holds the output of, as shell case patterns over
// " $* ": the compose up of an apply, a docker pull.
const (
	lingerUp   = `*" up -d "*`
	lingerPull = `" pull "*`
)

// lingeringDocker puts a docker program in front of the box's fake docker and makes
// it the box's compose.docker. For the commands that match (a shell case pattern over
// " $* "), it runs the fake (or, with fail set, prints fail on stderr and exits 1
// without it), then leaves a child holding its output for a minute, longer than the
// agent's 5 s wait delay, and exits with the fake's status; every other command is
// the fake's. The children are killed when the test ends. The fake docker itself is
// not changed.
func lingeringDocker(t *testing.T, b *box, match, fail string) {
	t.Helper()
	dir := t.TempDir()
	pids := filepath.Join(dir, "holders")
	body := `"` + b.Docker.Path + `" "$@"; status=$?`
	if fail != "" {
		body = "echo '" + fail + "' >&2; status=1"
	}
	script := "#!/bin/sh\ncase \" $* \" in\n" + match + ")\n\t" + body + "\n\tsleep 60 &\n\techo $! >> '" + pids + "'\n\texit $status ;;\nesac\n" +
		`exec "` + b.Docker.Path + `" "$@"` + "\n"
	docker := filepath.Join(dir, "docker")
	require.NoError(t, os.WriteFile(docker, []byte(script), 0o755))
	t.Cleanup(func() {
		data, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	b.Configure(func(c *deployd.Config) { c.Compose.Docker = docker })
}

// TestBinaryDockerOutputOutlivesAnExit0: the shipped binary, with a docker whose
// compose up and pulls exit 0 while a child keeps their output open past the wait
// delay, applies the release with one lease: the exit status decides, and the log
// says what held the output.
func TestBinaryDockerOutputOutlivesAnExit0(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{})
	lingeringDocker(t, b, lingerUp+"|"+lingerPull, "")
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))

	res := b.tickExit(deployd.ExitOK)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, 1, b.Leases())
	rep := b.LastReport()
	assert.Equal(t, "applied", rep.Result)
	assert.Empty(t, rep.Code)
	assert.Empty(t, b.State().Failed)
	for _, cmd := range []string{"docker compose up", "docker pull"} {
		assert.Contains(t, res.Stderr, `msg="docker exited 0, but its output stayed open after it exited, held by a child of docker`+"; its exit status decides: the command succeeded",
			"%s", cmd)
		assert.Contains(t, res.Stderr, `command="`+cmd+`"`)
	}
	assert.Regexp(t, `held_by="pid [0-9]+ \(sleep\)"`, res.Stderr)
	assert.NotContains(t, res.Stderr, "WaitDelay")
	assert.NotContains(t, res.Stderr, "REGISTRY_UNAVAILABLE")
}

// TestBinaryDockerFailsWithItsOutputHeld: the same docker exiting 1 is that exit's
// failure, with an honest code and what it printed: a compose up is APPLY_FAILED with
// its output in the report's tail; a pull that failed for no network reason is
// PULL_FAILED before the lease, naming what the daemon said.
func TestBinaryDockerFailsWithItsOutputHeld(t *testing.T) {
	testprog.SkipIfShort(t)
	t.Run("compose up", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		said := "Error response from daemon: driver failed programming external connectivity on endpoint monky-web-1: Bind for 0.0.0.0:8080 failed: port is already allocated"
		lingeringDocker(t, b, lingerUp, said)
		sha := b.Publish(faketenancy.SampleApp(b.Env, 1))

		res := b.tickExit(deployd.ExitFailed)
		assert.Equal(t, 1, b.Leases())
		rep := b.LastReport()
		assert.Equal(t, "failed", rep.Result)
		assert.Equal(t, "APPLY_FAILED", rep.Code)
		assert.Equal(t, sha, rep.SHA)
		assert.Contains(t, rep.Tail, said, "what compose printed before it exited")
		assert.Contains(t, res.Stderr, "exit status 1; its output stayed open 5s after it exited (held by pid ")
		assert.Contains(t, b.State().Failed, sha, "compose refused the release: the bundle's, remembered")
	})
	t.Run("docker pull", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		said := "failed to register layer: lstat /var/lib/docker/overlay2/5e6f: input/output error"
		lingeringDocker(t, b, lingerPull, said)
		b.Publish(faketenancy.SampleApp(b.Env, 1))

		res := b.tickExit(deployd.ExitFailed)
		assert.Zero(t, b.Leases(), "a pull before the lease costs none")
		rep := b.LastReport()
		assert.Equal(t, "failed", rep.Result)
		assert.Equal(t, "PULL_FAILED", rep.Code)
		assert.Contains(t, rep.Detail, said)
		assert.Contains(t, res.Stderr, "code=PULL_FAILED")
		assert.NotContains(t, res.Stderr, "REGISTRY_UNAVAILABLE")
		assert.Empty(t, b.State().Failed, "the box's fault is not remembered against the sha")
	})
}
