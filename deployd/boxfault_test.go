package deployd_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
)

// daemonDown is what the docker CLI prints when it cannot reach the daemon.
const daemonDown = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"

// dockerDownEnv is the box's docker environment with DOCKER_HOST at a socket that is
// not there: the Engine API finds no daemon, as on a box whose dockerd is stopped.
func dockerDownEnv(b *box) []string {
	return append(b.Docker.Env(), "DOCKER_HOST=unix://"+filepath.Join(b.T.TempDir(), "docker.sock"))
}

// TestDockerDownBeforeTheLeaseCostsNoLease: a box whose docker does not answer is
// found out before the lease: DOCKER_UNAVAILABLE is reported, nothing is remembered
// against the sha, and the first tick after docker is back applies with one lease,
// without a retry from tenancy.
func TestDockerDownBeforeTheLeaseCostsNoLease(t *testing.T) {
	b := newBox(t, boxOptions{})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	down := b.NewAgent(deployd.Options{DockerEnv: dockerDownEnv(b)})

	out, code := b.Tick(down)
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "DOCKER_UNAVAILABLE", string(out.Code))
	assert.False(t, out.Leased)
	assert.Zero(t, b.Leases(), "no lease for a box whose docker is down")
	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, "DOCKER_UNAVAILABLE", rep.Code)
	assert.Empty(t, b.State().Failed, "a box fault is never remembered against the sha")
	if lf := b.State().LastFailure; assert.NotNil(t, lf) {
		assert.Equal(t, "DOCKER_UNAVAILABLE", string(lf.Code), "status shows the box's code")
	}
	assert.Contains(t, b.Logs.String(), "Start docker")

	out, code = b.tick() // docker is back
	require.Equal(t, deployd.ExitOK, code, "%+v", out)
	assert.Equal(t, "applied", out.Result)
	assert.Equal(t, 1, b.Leases())
	assert.Equal(t, sha, b.Live())
}

// TestDockerDownAtComposeUpIsTheBoxs: docker that goes away between the check and
// compose up spends the lease it took, but the failure is the box's: reported as
// DOCKER_UNAVAILABLE, not remembered, and the next tick applies with one more lease.
func TestDockerDownAtComposeUpIsTheBoxs(t *testing.T) {
	b := newBox(t, boxOptions{script: &fakedockertest.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: daemonDown, Exit: 1, FailTimes: 1},
	}}})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "DOCKER_UNAVAILABLE", string(out.Code))
	assert.Equal(t, "DOCKER_UNAVAILABLE", b.LastReport().Code)
	assert.Empty(t, b.State().Failed)

	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v", out)
	assert.Equal(t, first, b.Live())
	assert.Equal(t, 2, b.Leases(), "at most one extra lease")
}

// TestDockerDownAfterPromoteRestores: a box fault after promote still puts the
// previous release back.
func TestDockerDownAfterPromoteRestores(t *testing.T) {
	b := newBox(t, boxOptions{})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)

	// The fake counts every call: the first up succeeded, the second fails, the
	// restore's succeeds.
	b.Docker.SetScript(&fakedockertest.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: daemonDown, Exit: 1, FailTimes: 2},
	}})
	spec := faketenancy.SampleApp(b.Env, 2)
	spec.Vars = map[string]string{"LOG_LEVEL": "debug"}
	second := b.Publish(spec)
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "DOCKER_UNAVAILABLE", string(out.Code))
	assert.Equal(t, deployd.RestoreHealthy, out.Restore)
	assert.Equal(t, first, b.Live(), "the previous release is live again")
	assert.NotContains(t, b.State().Failed, second)

	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v", out)
	assert.Equal(t, second, b.Live())
}
