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
	"github.com/monky/monky-deployd/deployd/codes"
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

	b.agent = b.NewAgent(deployd.Options{DockerEnv: dockerEnvWith(b, "DOCKER_CONFIG="+cfgDir), HealthPoll: 10 * time.Millisecond})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.tickExits(deployd.ExitOK)
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

// dockerEnvWith is the box's docker environment without its DOCKER_HOST, plus extra.
func dockerEnvWith(b *box, extra ...string) []string {
	var env []string
	for _, kv := range b.Docker.Env() {
		if !strings.HasPrefix(kv, "DOCKER_HOST=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestBoxFaultsBeforeTheLease: a fault of the box found before the lease costs no
// lease and is never remembered against the sha; the first tick after it is gone
// applies with one lease, without a retry from tenancy. Docker down (its socket not
// there) and a pull the box could not store are failures (exit 1, reported with the
// code, the box's last failure); docker answering after the 5 s bound of the check
// (DOCKER_TIMEOUT, not "cannot be reached") and a registry that cannot be reached are
// temporary (exit 75, nothing reported).
func TestBoxFaultsBeforeTheLease(t *testing.T) {
	t.Parallel()
	fails := func(command, stderr string) *fakedocker.Script {
		return &fakedocker.Script{Commands: map[string]fakedocker.Command{command: {Stderr: stderr, Exit: 1, FailTimes: 1}}}
	}
	for _, tc := range []struct {
		name   string
		script *fakedocker.Script
		// down: the first tick's agent finds no docker daemon.
		down               bool
		exit               int
		code               codes.Code
		detail, log, notIn string
	}{
		{name: "docker down", down: true, exit: deployd.ExitFailed, code: codes.DockerUnavailable, log: "Start docker"},
		{name: "docker too slow", script: &fakedocker.Script{Commands: map[string]fakedocker.Command{"version": {Delay: 6 * time.Second}}},
			exit: deployd.ExitTemporary, code: codes.DockerTimeout, log: "docker did not answer within its bound", notIn: "docker cannot be reached"},
		{name: "registry down", script: fails("pull", "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host\n"),
			exit: deployd.ExitTemporary, code: codes.RegistryUnavailable},
		{name: "pull failed", script: fails("pull", "failed to register layer: lstat /var/lib/docker/overlay2/5e6f: input/output error\n"),
			exit: deployd.ExitFailed, code: codes.PullFailed, detail: "failed to register layer",
			log: "docker could not pull an image of the release for a reason of this box", notIn: "registry cannot be reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.code == codes.DockerTimeout && testing.Short() {
				t.Skip("waits out the 5 s bound of docker's answer before the lease")
			}
			b := newBox(t, boxOptions{script: tc.script})
			sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
			agent := b.agent
			if tc.down {
				// DOCKER_HOST at a socket that is not there: the Engine API finds no
				// daemon, as on a box whose dockerd is stopped.
				agent = b.NewAgent(deployd.Options{DockerEnv: dockerEnvWith(b, "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "docker.sock"))})
			}
			out, code := b.Tick(agent)
			assert.Equal(t, tc.exit, code, "%+v", out)
			assert.Equal(t, tc.code, out.Code)
			assert.False(t, out.Leased)
			assert.Zero(t, b.Leases(), "a box fault before the lease costs no lease")
			assert.Empty(t, b.State().Failed, "a box fault is never remembered against the sha")
			if tc.exit == deployd.ExitTemporary {
				assert.Zero(t, b.TenancyCalls("/v1/agent/report"), "a temporary failure reports nothing")
			} else {
				rep := b.LastReport()
				assert.Equal(t, "failed", rep.Result)
				assert.Equal(t, string(tc.code), rep.Code)
				assert.Contains(t, rep.Detail, tc.detail)
				if lf := b.State().LastFailure; assert.NotNil(t, lf) {
					assert.Equal(t, tc.code, lf.Code, "status shows the box's code")
				}
			}
			assert.Contains(t, b.Logs.String(), tc.log)
			if tc.notIn != "" {
				assert.NotContains(t, b.Logs.String(), tc.notIn)
			}

			if tc.script != nil {
				require.NoError(t, b.Docker.SetScript(&fakedocker.Script{}))
			}
			b.tickApplied()
			assert.Equal(t, 1, b.Leases())
			assert.Equal(t, sha, b.Live())
		})
	}
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
	b.tickEnds(deployd.ExitFailed, "DOCKER_UNAVAILABLE")
	assert.Equal(t, "DOCKER_UNAVAILABLE", b.LastReport().Code)
	assert.Empty(t, b.State().Failed)

	b.tickApplies(first, 2) // at most one extra lease
}

// TestDockerDownAfterPromoteRestores: a box fault after promote still puts the
// previous release back.
func TestDockerDownAfterPromoteRestores(t *testing.T) {
	t.Parallel()
	b, first := liveBox(t)

	// The fake counts every call: the first up succeeded, the second fails, the
	// restore's succeeds.
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: daemonDown, Exit: 1, FailTimes: 2},
	}}))
	spec := faketenancy.SampleApp(b.Env, 2)
	spec.Vars = map[string]string{"LOG_LEVEL": "debug"}
	second := b.Publish(spec)
	out := b.tickEnds(deployd.ExitFailed, "DOCKER_UNAVAILABLE")
	assert.Equal(t, deployd.RestoreHealthy, out.Restore)
	assert.Equal(t, first, b.Live(), "the previous release is live again")
	assert.NotContains(t, b.State().Failed, second)

	b.tickExits(deployd.ExitOK)
	assert.Equal(t, second, b.Live())
}
