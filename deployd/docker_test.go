package deployd_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

func TestDockerEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{
			name: "only the docker CLI's own variables pass, in a fixed order",
			environ: []string{
				"VAULT_TOKEN=hvs.x", "DOCKER_HOST=unix:///run/docker.sock", "HOME=/root",
				"PATH=/usr/bin:/bin", "DB_PASSWORD=s3cr3t", "FAKE_DOCKER_LOG=/tmp/log",
				"FAKE_DOCKER_STATE=/tmp/state", "FAKE_DOCKER_SCRIPT=/tmp/script", "COMPOSE_FILE=evil.yaml",
			},
			want: []string{"PATH=/usr/bin:/bin", "HOME=/root", "DOCKER_HOST=unix:///run/docker.sock"},
		},
		{
			name:    "without PATH, the default PATH",
			environ: []string{"HOME=/root"},
			want:    append([]string{"HOME=/root"}, deployd.DefaultDockerEnv()...),
		},
		{
			name:    "nothing",
			environ: nil,
			want:    deployd.DefaultDockerEnv(),
		},
		{
			name:    "the last of a repeated name wins; an empty value is kept",
			environ: []string{"PATH=/a", "DOCKER_CONTEXT=x", "PATH=/b", "DOCKER_CONTEXT=", "NOEQUALS"},
			want:    []string{"PATH=/b", "DOCKER_CONTEXT="},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, deployd.DockerEnv(tc.environ))
		})
	}
}

// TestDockerEnvNamesNoFake: the production allow-list names no fake's variable.
func TestDockerEnvNamesNoFake(t *testing.T) {
	names := deployd.DockerEnvNames()
	assert.Contains(t, names, "PATH")
	for _, n := range names {
		assert.False(t, strings.HasPrefix(n, "FAKE_"), n)
	}
	names[0] = "changed"
	assert.Equal(t, "PATH", deployd.DockerEnvNames()[0], "a copy")
}

// TestReadsTheDockerContext: after `docker context use` (the CLI's currentContext in
// $DOCKER_CONFIG/config.json, no DOCKER_HOST), the agent reads the daemon of that
// context, which is the one compose changes: here the fake engine, named only by the
// context's meta.json. Were the context ignored, the reads would go to
// /var/run/docker.sock and the live health would not be the fake's.
func TestReadsTheDockerContext(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	cfgDir := filepath.Join(b.Dir, "docker-config")
	sum := sha256.Sum256([]byte("laptop"))
	metaDir := filepath.Join(cfgDir, "contexts", "meta", hex.EncodeToString(sum[:]))
	require.NoError(t, os.MkdirAll(metaDir, 0o700))
	meta := `{"Name":"laptop","Metadata":{},"Endpoints":{"docker":{"Host":"` + b.Docker.DockerHost() + `","SkipTLSVerify":false}}}`
	require.NoError(t, os.WriteFile(filepath.Join(metaDir, "meta.json"), []byte(meta), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"currentContext":"laptop"}`), 0o600))

	var env []string
	for _, kv := range b.Docker.Env() {
		if !strings.HasPrefix(kv, "DOCKER_HOST=") {
			env = append(env, kv)
		}
	}
	b.agent = b.NewAgent(deployd.Options{DockerEnv: append(env, "DOCKER_CONFIG="+cfgDir), HealthPoll: 10 * time.Millisecond})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code, b.Logs.String())
	b.idleTick()

	live := b.lastLive()
	require.NotNil(t, live.Healthy, "live %+v", live)
	assert.True(t, *live.Healthy)
	engine := 0
	for _, c := range b.DockerCalls("") {
		if c.Argv[0] == fakedocker.EngineArgv0 {
			engine++
		}
		assert.False(t, c.Argv[0] == "inspect" || slices.Contains(c.Argv, "ps"),
			"docker %v: the reads go through the Engine API of the context's daemon, not the CLI", c.Argv)
	}
	assert.Positive(t, engine, "the context's daemon (the fake engine) was read")
}

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
	t.Parallel()
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

// TestDockerTooSlowBeforeTheLeaseIsTemporary: a docker that answers, but not within
// the 5 s bound of the check before the lease, is DOCKER_TIMEOUT, not "cannot be
// reached": exit 75, no lease, no report, nothing remembered; the next tick applies.
func TestDockerTooSlowBeforeTheLeaseIsTemporary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits out the 5 s bound of docker's answer before the lease")
	}
	b := newBox(t, boxOptions{script: &fakedocker.Script{Commands: map[string]fakedocker.Command{
		"version": {Delay: 6 * time.Second},
	}}})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitTemporary, code, "%+v", out)
	assert.Equal(t, "DOCKER_TIMEOUT", string(out.Code))
	assert.False(t, out.Leased)
	assert.Zero(t, b.Leases())
	assert.Zero(t, b.TenancyCalls("/v1/agent/report"), "a temporary failure reports nothing")
	assert.Empty(t, b.State().Failed)
	assert.Contains(t, b.Logs.String(), "docker did not answer within its bound")
	assert.NotContains(t, b.Logs.String(), "docker cannot be reached")

	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{}))
	b.tickApplies(sha, 1)
}

// TestDockerDownAtComposeUpIsTheBoxs: docker that goes away between the check and
// compose up spends the lease it took, but the failure is the box's: reported as
// DOCKER_UNAVAILABLE, not remembered, and the next tick applies with one more lease.
func TestDockerDownAtComposeUpIsTheBoxs(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{script: &fakedocker.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: daemonDown, Exit: 1, FailTimes: 1},
	}}})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "DOCKER_UNAVAILABLE", string(out.Code))
	assert.Equal(t, "DOCKER_UNAVAILABLE", b.LastReport().Code)
	assert.Empty(t, b.State().Failed)

	b.tickApplies(first, 2) // at most one extra lease
}

// TestDockerDownAfterPromoteRestores: a box fault after promote still puts the
// previous release back.
func TestDockerDownAfterPromoteRestores(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	first := b.applySample(1)

	// The fake counts every call: the first up succeeded, the second fails, the
	// restore's succeeds.
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: daemonDown, Exit: 1, FailTimes: 2},
	}}))
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
