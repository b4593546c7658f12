package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
	"github.com/monky/monky-deployd/internal/testbox"
)

// unhealthyScript makes web unhealthy at every health wait.
func unhealthyScript(commands map[string]fakedocker.Command) *fakedockertest.Script {
	s := fastScript(commands)
	s.Services["web"] = fakedocker.Service{States: []fakedocker.State{{Health: "unhealthy"}}, Logs: "fatal: cannot start\n"}
	return s
}

// TestCrashDuringRestore: a SIGKILL while an unhealthy apply restores the previous
// release leaves `current` on that release; when the next run's apply fails again, the
// box must restore it again and go on serving it — not take the environment down as if
// it had served nothing.
func TestCrashDuringRestore(t *testing.T) {
	testbox.SkipIfShort(t)
	c := newCrashBox(t)
	// The new release is unhealthy; its logs call takes 2s, time enough to make the
	// restore's compose up hang.
	c.setScript(unhealthyScript(map[string]fakedocker.Command{"logs": {Delay: fakedocker.Duration(2 * time.Second)}}))
	p := c.start([]string{"run", "--config", c.CfgPath})
	testbox.WaitFor(t, 30*time.Second, "the failing service's logs", func() bool { return len(c.DockerCalls("logs")) > 0 })
	ups := len(c.DockerCalls("up"))
	c.setScript(unhealthyScript(map[string]fakedocker.Command{"up": {Delay: fakedocker.Duration(30 * time.Second)}}))
	testbox.WaitFor(t, 30*time.Second, "the restore's compose up", func() bool { return len(c.DockerCalls("up")) > ups })
	p.Kill()
	require.Equal(t, c.oldSHA, c.checkInvariant(t, "after a kill during the restore"), "current was already back on the old release")

	// The next run: the new sha is asked for again and fails again.
	c.setScript(unhealthyScript(nil))
	metricsPath := filepath.Join(t.TempDir(), "monky-deployd.prom")
	res := c.tick("--metrics-file", metricsPath)
	require.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
	assert.Equal(t, "UNHEALTHY", c.LastReport().Code)
	assert.Equal(t, c.oldSHA, c.Live(), "the box goes on serving the old release")
	// The restored release is as unhealthy here: the box is degraded, and says so.
	assert.Equal(t, `{result="restored-unhealthy"}`, labelsOf(t, metricsPath, "monky_deployd_last_restore"))
	assert.Equal(t, 1.0, parseMetrics(t, metricsPath)["monky_deployd_last_restore"])
	assert.Equal(t, c.oldSHA, c.State().LiveSHA)
	ups2 := c.DockerCalls("up")
	require.NotEmpty(t, ups2)
	assert.Equal(t, c.oldSHA, filepath.Base(projectDirOf(ups2[len(ups2)-1].Argv)), "the last up is the restored old release")
}

// TestFailedApplyAfterDown: after tenancy took the environment down, a failed apply
// must leave it down — the downed release is not "what the box served".
func TestFailedApplyAfterDown(t *testing.T) {
	testbox.SkipIfShort(t)
	c := newCrashBox(t)
	c.SetDesired(faketenancy.Desired{Action: "down"})
	res := c.tick()
	require.Equal(t, 0, res.Code, res.Stderr)
	require.Equal(t, "", c.Live())
	upsBefore := len(c.DockerCalls("up"))

	c.setScript(unhealthyScript(nil))
	c.SetDesired(faketenancy.Desired{Action: "apply", SHA: c.newSHA})
	res = c.tick()
	require.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
	assert.Equal(t, "UNHEALTHY", c.LastReport().Code)
	assert.Equal(t, "", c.Live(), "the box served nothing before the failed apply, and serves nothing after it")
	for _, call := range c.DockerCalls("up")[upsBefore:] {
		assert.NotEqual(t, c.oldSHA, filepath.Base(projectDirOf(call.Argv)), "the downed release must not come back up")
	}
	assert.False(t, c.Docker.Status().Up, "the failed release is taken down")
}

// projectDirOf returns the --project-directory of a docker compose argv.
func projectDirOf(argv []string) string {
	for i, a := range argv {
		if a == "--project-directory" && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}
