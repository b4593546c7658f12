package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestBinaryLifecycle drives the shipped binary through a box's life against the
// fakes: bootstrap, an apply with a secret, none, a refused bundle, tenancy down, and
// the env-mismatch latch: exit codes, log lines, the metrics file and the process
// environment docker sees. (The box's side — token, .env, leases, reports — of each
// step is deployd's: TestApplyNoneDown, TestRefusalsCostNoLease, TestExitCodes and
// TestEnvMismatchLatch.)
func TestBinaryLifecycle(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{})
	metricsPath := filepath.Join(b.Dir, "state", "monky_deployd.prom")

	// bootstrap: consume the grant, store the token, confirm with a check-in.
	res := b.runExit(0, []string{"bootstrap", "--config", b.CfgPath})
	assert.Contains(t, res.Stderr, "bootstrap confirmed by a check-in")
	_, err := os.Stat(b.Cfg.BootstrapGrant)
	assert.ErrorIs(t, err, os.ErrNotExist, "the grant is consumed")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"))
	assert.Zero(t, b.TenancyCalls("/v1/agent/lease"))

	// apply with a secret: exit 0, the secret not in the log.
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	res = b.tickExit(0, "--metrics-file", metricsPath)
	assert.Equal(t, sha, b.Live())
	assert.NotContains(t, res.Stderr, "s3cr3t-db-password")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"))
	m := parseMetrics(t, metricsPath)
	assert.Equal(t, 0.0, m["monky_deployd_exit_code"])
	assert.Equal(t, 1.0, m["monky_deployd_live_serial"])
	assert.Equal(t, 0.0, m["monky_deployd_env_mismatch_latched"])
	assert.Greater(t, m["monky_deployd_token_ttl_seconds"], 0.0)
	assert.InDelta(t, float64(time.Now().Unix()), m["monky_deployd_last_checkin_timestamp_seconds"], 120)
	assert.Equal(t, `{env_id="env-dev-01",live_sha="`+sha+`",version="`+deployd.Version+`"}`, labelsOf(t, metricsPath, "monky_deployd_info"))
	assert.Equal(t, `{code="",result="applied"}`, labelsOf(t, metricsPath, "monky_deployd_last_result"))

	// docker compose saw only the variables the agent passes on, never the agent's own
	// environment (VAULT_TOKEN, SOME_UNRELATED).
	calls := b.DockerCalls("")
	require.NotEmpty(t, calls)
	for _, c := range calls {
		for _, name := range c.Env {
			assert.Contains(t, deployd.DockerEnvNames(), name, "docker %v received %s", c.Argv, name)
		}
	}

	// none: exit 0.
	b.SetDesired(faketenancy.Desired{Action: "none"})
	b.tickExit(0, "--metrics-file", metricsPath)
	assert.Equal(t, sha, b.Live())

	// A refused bundle: exit 1, the box keeps serving.
	bad := faketenancy.SampleApp(b.Env, 2)
	bad.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    privileged: true\n"
	delete(bad.Files, "config/app.toml")
	b.Publish(bad)
	res = b.tickExit(deployd.ExitFailed, "--metrics-file", metricsPath)
	assert.Contains(t, res.Stderr, "bundle refused before the lease")
	assert.Equal(t, sha, b.Live(), "the box keeps serving")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"), "neither none nor a refused bundle costs a lease")
	m = parseMetrics(t, metricsPath)
	assert.Equal(t, 1.0, m["monky_deployd_exit_code"])
	assert.Equal(t, `{code="PRIVILEGED",result="failed"}`, labelsOf(t, metricsPath, "monky_deployd_last_result"))
	// The check-in read the live release: healthy, and each service with it.
	assert.Equal(t, 1.0, m["monky_deployd_live_known"])
	assert.Equal(t, 1.0, m["monky_deployd_live_healthy"])
	assert.Equal(t, 1.0, m[`monky_deployd_service_healthy{service="web"}`])
	assert.Equal(t, 0.0, m[`monky_deployd_service_restarts{service="web"}`])
	assert.Positive(t, m["monky_deployd_live_observed_timestamp_seconds"])

	// tenancy down: 503 on the check-in is 75 (a tenancy that is gone is 75 too:
	// deployd's TestExitCodes, "tenancy unreachable is 75").
	b.SetDesired(faketenancy.Desired{Action: "none"})
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}})
	res = b.tickExit(deployd.ExitTemporary, "--metrics-file", metricsPath)
	assert.Contains(t, res.Stderr, "level=WARN")
	assert.Contains(t, res.Stderr, "tenancy unavailable")
	assert.Equal(t, 75.0, parseMetrics(t, metricsPath)["monky_deployd_exit_code"])
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
	b.tickExit(0)

	// env mismatch: the token belongs to another env → 78, then 78 again without the
	// network.
	b.placeForeignToken()
	res = b.tickExit(deployd.ExitEnvMismatch, "--metrics-file", metricsPath)
	assert.Contains(t, res.Stderr, "AGENT_ENV_MISMATCH")
	dockerBefore := len(b.DockerCalls(""))
	res = b.tickExit(deployd.ExitEnvMismatch, "--metrics-file", metricsPath)
	assert.Contains(t, res.Stderr, "not contacting the network")
	assert.Len(t, b.DockerCalls(""), dockerBefore, "a latched run runs no docker")
	assert.Equal(t, 1.0, parseMetrics(t, metricsPath)["monky_deployd_env_mismatch_latched"])
	assert.Equal(t, 78.0, parseMetrics(t, metricsPath)["monky_deployd_exit_code"])
	assert.Equal(t, sha, b.Live())

	// bootstrap with a fresh grant of this env clears the latch.
	b.PlaceGrant()
	b.runExit(0, []string{"bootstrap", "--config", b.CfgPath})
	b.tickExit(0)
	assert.Nil(t, b.State().EnvMismatch)
}

// TestBinaryLockHeld: a second run while one holds the lock exits 75 at once.
func TestBinaryLockHeld(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{script: &fakedocker.Script{Commands: map[string]fakedocker.Command{"version": {Delay: 5 * time.Second}}}})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	first := b.start([]string{"run", "--config", b.CfgPath})
	testprog.WaitFor(t, 30*time.Second, "the first run's docker version call", func() bool { return len(b.DockerCalls("version")) > 0 })
	start := time.Now()
	res := b.tickExit(deployd.ExitTemporary)
	assert.Less(t, time.Since(start), 4*time.Second, "exits at once")
	assert.Contains(t, res.Stderr, "holds the lock")
	assert.Equal(t, 0, first.Wait(t, 60*time.Second).Code)
}

// TestBinaryLoop: run --loop stops on 78, backs off on 75 and stops on SIGTERM with 0.
func TestBinaryLoop(t *testing.T) {
	testprog.SkipIfShort(t)
	t.Run("stops on 78", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		b.placeForeignToken()
		res := b.start([]string{"run", "--config", b.CfgPath, "--loop", "--interval", "100ms"}).Wait(t, 60*time.Second)
		assert.Equal(t, deployd.ExitEnvMismatch, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, "stopping the loop: AGENT_ENV_MISMATCH is never retried")
		assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"), "one check-in, then the loop stops")
	})

	t.Run("backs off on 75", func(t *testing.T) {
		b := newBox(t, boxOpts{nextCheckin: time.Second})
		b.SetDesired(faketenancy.Desired{Action: "none"})
		b.tickExit(0) // bootstrap, so that the loop only checks in
		b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}})
		const interval = 200 * time.Millisecond
		p := b.start([]string{"run", "--config", b.CfgPath, "--loop", "--interval", interval.String()})
		checkins := func() []time.Time {
			var ts []time.Time
			for _, r := range b.Stack.Tenancy.Requests() {
				if r.Path == "/v1/agent/checkin" {
					ts = append(ts, r.Time)
				}
			}
			return ts
		}
		// 1 + 4 failing check-ins: pauses of 200, 400, 800, 1600 ms (±10%).
		testprog.WaitFor(t, 60*time.Second, "five check-ins", func() bool { return len(checkins()) >= 6 })
		failing := checkins()[1:6]
		// Recovery: the pause goes back to tenancy's next_checkin_s (1s).
		b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
		n := len(checkins())
		testprog.WaitFor(t, 60*time.Second, "two check-ins after the recovery", func() bool { return len(checkins()) >= n+2 })
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
		res := p.Wait(t, 30*time.Second)
		assert.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, "stopping the loop on a signal")

		for i := 1; i < len(failing); i++ {
			gap := failing[i].Sub(failing[i-1])
			want := interval << (i - 1)
			t.Logf("pause %d after a 75: %s (backoff %s)", i, gap.Round(time.Millisecond), want)
			// A lower bound only: a loaded machine may stretch a pause, never shorten it.
			assert.GreaterOrEqual(t, gap, want*9/10, "the pause after failure %d is at least the backoff minus the jitter: no busy loop", i)
		}
		all := checkins()
		gap := all[len(all)-1].Sub(all[len(all)-2])
		t.Logf("pause after a success: %s (next_checkin_s 1)", gap.Round(time.Millisecond))
		assert.GreaterOrEqual(t, gap, 900*time.Millisecond, "after a success the loop waits what tenancy asked, not the backoff")
	})
}

// metricFamilies parses the metrics file with Prometheus's own text parser.
func metricFamilies(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // read-only
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	require.NoError(t, err, "the metrics file must parse")
	return fams
}

// parseMetrics parses the metrics file with Prometheus's own text parser and returns
// each metric's gauge value by name.
func parseMetrics(t *testing.T, path string) map[string]float64 {
	t.Helper()
	fams := metricFamilies(t, path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), "node_exporter must read it")
	out := map[string]float64{}
	for name, fam := range fams {
		if name == "monky_deployd_service_healthy" || name == "monky_deployd_service_restarts" {
			// one sample per service of the live release: name{service="web"}
			for _, m := range fam.GetMetric() {
				require.Len(t, m.GetLabel(), 1, name)
				out[name+`{service="`+m.GetLabel()[0].GetValue()+`"}`] = m.GetGauge().GetValue()
			}
			continue
		}
		require.Len(t, fam.GetMetric(), 1, name)
		out[name] = fam.GetMetric()[0].GetGauge().GetValue()
	}
	return out
}

// labelsOf returns the label set of the one series of metric name, as {k="v",…}
// sorted by name.
func labelsOf(t *testing.T, path, name string) string {
	t.Helper()
	fam, ok := metricFamilies(t, path)[name]
	require.True(t, ok, "no metric %s", name)
	require.Len(t, fam.GetMetric(), 1)
	var parts []string
	for _, l := range fam.GetMetric()[0].GetLabel() {
		parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// countBao counts the requests to the fake OpenBao whose path contains part.
func countBao(b *box, part string) int {
	n := 0
	for _, r := range b.Stack.Bao.Requests() {
		if strings.Contains(r.Path, part) {
			n++
		}
	}
	return n
}

// TestBinaryLoopSignalDuringTick: SIGTERM while a tick of run --loop is busy ends the
// loop with 0.
func TestBinaryLoopSignalDuringTick(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{script: fastScript(map[string]fakedocker.Command{"up": {Delay: 30 * time.Second}})})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	p := b.start([]string{"run", "--config", b.CfgPath, "--loop", "--interval", "100ms"})
	testprog.WaitFor(t, 30*time.Second, "compose up", func() bool { return len(b.DockerCalls("up")) > 0 })
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	res := p.Wait(t, 30*time.Second)
	assert.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "stopping the loop on a signal")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"), "no further tick after the signal")
}

// prompt is how long a refusal of a file that is not regular may take: it must not
// wait on the file.
const prompt = 10 * time.Second

// runPrompt runs the binary with args and fails the test if it has not ended within
// prompt (the run is killed then).
func (b *box) runPrompt(t *testing.T, args ...string) result {
	t.Helper()
	res := b.start(args).Wait(t, 2*prompt)
	assert.Less(t, res.Elapsed, prompt, "monky-deployd %s must not wait on the file", strings.Join(args, " "))
	return res
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, syscall.Mkfifo(p, 0o600))
}

// TestBinaryRefusesFifoFiles: a config, grant, token or state file that is a fifo (no
// writer: a blocking open hangs for ever) is refused at once, exit 1, with its path
// and what it is named; nothing reaches the network with it.
func TestBinaryRefusesFifoFiles(t *testing.T) {
	// The config and the state: every command.
	for _, name := range []string{"config", "state"} {
		t.Run(name, func(t *testing.T) {
			b := newBox(t, boxOpts{})
			fifo, cfg, says := b.Cfg.StatePath(), b.CfgPath, b.Cfg.StatePath()+" is a fifo, not a regular file"
			if name == "config" {
				fifo = filepath.Join(b.Dir, "fifo.yaml")
				cfg, says = fifo, fifo+": cannot read: a fifo, not a regular file"
			}
			mkfifo(t, fifo)
			for _, cmd := range []string{"run", "status", "bootstrap"} {
				res := b.runPrompt(t, cmd, "--config", cfg)
				if name == "config" {
					assert.Contains(t, res.Stderr, "code=CONFIG_INVALID", cmd)
				}
				if cmd == "status" {
					// status cannot tell: unknown (3), and it says why on stdout.
					assert.Equal(t, deployd.VerdictUnknown.Exit(), res.Code, res.Stderr)
					assert.Contains(t, res.Stdout, says)
				} else {
					assert.Equal(t, deployd.ExitFailed, res.Code, "%s:\n%s", cmd, res.Stderr)
					assert.Empty(t, res.Stdout, cmd)
				}
				if cmd != "status" || name == "config" {
					assert.Contains(t, res.Stderr, says, cmd)
				}
			}
			assert.Empty(t, b.Stack.Tenancy.Requests())
			assert.Empty(t, b.Stack.Bao.Requests())
		})
	}

	t.Run("grant", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		mkfifo(t, b.Cfg.BootstrapGrant)
		for _, args := range [][]string{{"run"}, {"bootstrap"}, {"bootstrap", "--force"}} {
			res := b.runPrompt(t, append(args, "--config", b.CfgPath)...)
			assert.Equal(t, deployd.ExitFailed, res.Code, "%v:\n%s", args, res.Stderr)
			assert.Contains(t, res.Stderr, b.Cfg.BootstrapGrant+" is a fifo, not a regular file", args)
			assert.Contains(t, res.Stderr, "code=UNAUTHENTICATED", args)
		}
		assert.Zero(t, countBao(b, "/login"), "no login with what a fifo holds")
		assert.Empty(t, b.Stack.Tenancy.Requests())
		fi, err := os.Lstat(b.Cfg.BootstrapGrant)
		require.NoError(t, err)
		assert.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "the fifo is left where it is")
	})

	t.Run("token", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		mkfifo(t, b.Cfg.TokenPath())
		res := b.runPrompt(t, "run", "--config", b.CfgPath)
		assert.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, b.Cfg.TokenPath()+" is a fifo, not a regular file")
		assert.Contains(t, res.Stderr, "code=STATE_UNAVAILABLE")
		assert.Empty(t, b.Stack.Tenancy.Requests())
		assert.Empty(t, b.Stack.Bao.Requests())
		_, err := os.Stat(b.Cfg.BootstrapGrant)
		assert.NoError(t, err, "the grant is kept")

		res = b.runPrompt(t, "status", "--config", b.CfgPath)
		assert.Equal(t, deployd.VerdictCritical.Exit(), res.Code, res.Stderr)
		assert.Regexp(t, `(?m)^token:\s+unreadable: `+b.Cfg.TokenPath()+` is a fifo, not a regular file$`, res.Stdout)
	})
}

// TestBinaryBootstrap: what the bootstrap command prints and exits with. Without a
// token or a grant, or with a corrupt token, run and bootstrap exit 1 and say so. A
// grant of another env: exit 1, UNAUTHENTICATED, the grant neither consumed nor
// printed (kept, no login, no latch: deployd's TestBootstrapChecksTheGrant and
// TestRunChecksTheGrant). A bootstrapped box: exit 0 and says so, unless --force
// (grant and logins: deployd's TestBootstrapOfABootstrappedBox). --grant consumes the
// named grant, not the config's.
func TestBinaryBootstrap(t *testing.T) {
	t.Run("no token, no grant", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		res := b.tickExit(deployd.ExitFailed)
		assert.Contains(t, res.Stderr, "monky-deployd bootstrap")
		assert.Empty(t, b.Stack.Tenancy.Requests())
		res = b.runExit(deployd.ExitFailed, []string{"bootstrap", "--config", b.CfgPath})
		assert.Contains(t, res.Stderr, "bootstrap failed")

		// A token file a crash or a disk left unusable (NULs) is known as corrupt when
		// read, never sent (it would be an invalid header, an endless exit 75): every run
		// exits 1 with UNAUTHENTICATED and says what to do. (That it is never sent, and
		// with a grant the run bootstraps from it: deployd's TestCorruptTokenFile; every
		// kind of corrupt file is the same ErrTokenCorrupt: TestReadTokenFileCorrupt.)
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 96), 0o600))
		for range 2 {
			res = b.tickExit(deployd.ExitFailed)
			assert.Contains(t, res.Stderr, "code=UNAUTHENTICATED")
			assert.Contains(t, res.Stderr, "the OpenBao token file "+b.Cfg.TokenPath()+" is corrupt")
			assert.Contains(t, res.Stderr, "place a fresh bootstrap grant at "+b.Cfg.BootstrapGrant+" and run `monky-deployd bootstrap`")
			assert.NotContains(t, res.Stderr, "invalid header field value")
		}
	})

	t.Run("grant of another env", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		grant := b.Stack.Bao.MintGrant("env-dev-02")
		require.NoError(t, os.WriteFile(b.Cfg.BootstrapGrant, []byte(grant+"\n"), 0o600))
		res := b.runExit(deployd.ExitFailed, []string{"bootstrap", "--config", b.CfgPath})
		assert.Contains(t, res.Stderr, "code=UNAUTHENTICATED")
		assert.Contains(t, res.Stderr, "is for env env-dev-02, and this box is env-dev-01")
		assert.NotContains(t, res.Stderr, "consumed the grant")
		assert.NotContains(t, res.Stderr, grant)
	})

	t.Run("already bootstrapped", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		b.SetDesired(faketenancy.Desired{Action: "none"})
		require.Equal(t, 0, b.tick().Code)
		// Without a grant: it says the box is bootstrapped, not that there is no token.
		res := b.runExit(0, []string{"bootstrap", "--config", b.CfgPath})
		assert.Contains(t, res.Stderr, "already bootstrapped")
		assert.NotContains(t, res.Stderr, "no token")
		assert.NotContains(t, res.Stderr, "bootstrap confirmed by a check-in")

		b.PlaceGrant()
		res = b.runExit(0, []string{"bootstrap", "--config", b.CfgPath})
		assert.Contains(t, res.Stderr, "already bootstrapped")
		res = b.runExit(0, []string{"bootstrap", "--config", b.CfgPath, "--force"})
		assert.Contains(t, res.Stderr, "bootstrap confirmed by a check-in")
		_, err := os.Stat(b.Cfg.BootstrapGrant)
		assert.ErrorIs(t, err, os.ErrNotExist, "consumed with --force")
	})

	t.Run("--grant", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		b.SetDesired(faketenancy.Desired{Action: "none"})
		grant := filepath.Join(b.Dir, "handed-over.jwt")
		require.NoError(t, os.WriteFile(grant, []byte(b.Stack.Bao.MintGrant(b.Env)+"\n"), 0o600))
		b.runExit(0, []string{"bootstrap", "--config", b.CfgPath, "--grant", grant})
		_, err := os.Stat(grant)
		assert.ErrorIs(t, err, os.ErrNotExist, "the named grant is consumed")
		assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"), "confirmed by a check-in")
		// Used again (forced: the box is bootstrapped), the grant is gone: exit 1 with a
		// message naming the path.
		res := b.runExit(deployd.ExitFailed, []string{"bootstrap", "--config", b.CfgPath, "--grant", grant, "--force"})
		assert.Contains(t, res.Stderr, "handed-over.jwt")
		b.tickExit(0) // the stored token serves the next run
	})
}

// TestBinaryDockerSocketMissing: the shipped binary reads DOCKER_HOST from its
// environment: at a socket that is not there it reports DOCKER_UNAVAILABLE before the
// lease and exits 1. (No lease, and the first tick once docker is back applies with
// one: deployd's TestBoxFaultsBeforeTheLease.)
func TestBinaryDockerSocketMissing(t *testing.T) {
	b := newBox(t, boxOpts{})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	res := b.runExit(1, []string{"run", "--config", b.CfgPath}, "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "docker.sock"))
	assert.Contains(t, res.Stderr, "code=DOCKER_UNAVAILABLE")
	assert.Contains(t, res.Stderr, "Start docker")
}

// TestBinaryFullDisks: deploy_dir and state_dir on small tmpfs mounts. A release of
// 2000 one-byte files passes a count of bytes but not of blocks: DISK_LOW before
// the lease. A state dir without room for the token: DISK_FULL before the lease.
// Once space is freed, the next tick applies with one lease. Needs root (mount).
func TestBinaryFullDisks(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts tmpfs and spawns the binary; run without -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; CI runs this test as root")
	}
	b := newBox(t, boxOpts{})
	b.Configure(func(c *deployd.Config) { c.MinFreeMB = 0 })
	require.Equal(t, 0, b.run([]string{"bootstrap", "--config", b.CfgPath}).Code)
	deployFiller := mountTmpfs(t, b.Cfg.DeployDir, 64<<20, 3<<20)
	mountTmpfs(t, b.Cfg.StateDir, 1<<20, -1)
	stateFiller := filepath.Join(b.Cfg.StateDir, "filler")

	spec := faketenancy.SampleApp(b.Env, 1)
	for i := range 2000 {
		spec.Files[fmt.Sprintf("conf/%02d/%d.txt", i%50, i)] = "x"
	}
	b.Publish(spec)
	res := b.tickExit(1)
	assert.Contains(t, res.Stderr, "DISK_LOW")
	assert.Regexp(t, `DISK_LOW: [0-9] MiB free under deploy_dir, the release needs 1[6-9] MiB`, res.Stderr, "counted in blocks: 2000 blocks of 4 KiB, twice")
	assert.Zero(t, b.Leases(), "a full deploy dir costs no lease")

	require.NoError(t, os.Remove(deployFiller))
	fill(t, stateFiller, b.Cfg.StateDir, 128<<10)
	res = b.tickExit(1)
	assert.Contains(t, res.Stderr, "code=DISK_FULL")
	assert.Contains(t, res.Stderr, b.Cfg.StateDir)
	assert.Zero(t, b.Leases(), "a full state dir costs no lease")
	assert.Empty(t, b.State().Failed, "box faults are never remembered")

	require.NoError(t, os.Remove(stateFiller))
	b.tickExit(0)
	assert.Equal(t, 1, b.Leases())
}

// mountTmpfs mounts a tmpfs of size bytes on dir (its content copied onto the
// mount), unmounted at cleanup, and, unless left is negative, fills it with a file
// that leaves about left bytes free, whose path it returns.
func mountTmpfs(t *testing.T, dir string, size, left int64) string {
	t.Helper()
	saved := t.TempDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	copyDir(t, saved, dir)
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)+",mode=0700"))
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	copyDir(t, dir, saved)
	filler := filepath.Join(dir, "filler")
	if left >= 0 {
		fill(t, filler, dir, left)
	}
	return filler
}

// fill writes path so that about left bytes stay free on dir's file system.
func fill(t *testing.T, path, dir string, left int64) {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	n := max(int64(st.Bavail)*st.Bsize-left, 0)
	require.NoError(t, os.WriteFile(path, make([]byte, n), 0o600))
}

// copyDir copies the content of src into dst (cp -a).
func copyDir(t *testing.T, dst, src string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o700))
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
	require.NoError(t, err, strings.TrimSpace(string(out)))
}
