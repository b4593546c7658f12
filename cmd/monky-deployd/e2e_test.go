package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
	"github.com/monky/monky-deployd/internal/testbox"
)

// TestBinaryLifecycle drives the shipped binary through a box's life against the
// fakes: bootstrap, an apply with a secret, none, a refused bundle, tenancy down, and
// the env-mismatch latch.
func TestBinaryLifecycle(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{})
	metricsPath := filepath.Join(b.Dir, "state", "monky_deployd.prom")

	// bootstrap: consume the grant, store the token, confirm with a check-in.
	res := b.run([]string{"bootstrap", "--config", b.CfgPath})
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "bootstrap confirmed by a check-in")
	_, err := os.Stat(b.Cfg.BootstrapGrant)
	assert.ErrorIs(t, err, os.ErrNotExist, "the grant is consumed")
	info, err := os.Stat(b.Cfg.TokenPath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"))
	assert.Zero(t, b.TenancyCalls("/v1/agent/lease"))

	// apply with a secret: exit 0, the .env holds it, one lease, report applied.
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	res = b.tick("--metrics-file", metricsPath)
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Equal(t, sha, b.Live())
	env, err := os.ReadFile(filepath.Join(b.Cfg.CurrentLink(), ".env"))
	require.NoError(t, err)
	assert.Contains(t, string(env), "s3cr3t-db-password")
	assert.NotContains(t, res.Stderr, "s3cr3t-db-password")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"))
	rep := b.LastReport()
	assert.Equal(t, "applied", rep.Result)
	assert.Equal(t, sha, rep.SHA)
	assert.Len(t, rep.Services, 2)
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
	calls := b.Docker.Calls()
	require.NotEmpty(t, calls)
	for _, c := range calls {
		for _, name := range c.Env {
			assert.Contains(t, deployd.DockerEnvNames(), name, "docker %v received %s", c.Argv, name)
		}
	}

	// none: exit 0, no report, no lease.
	b.SetDesired(faketenancy.Desired{Action: "none"})
	reports := len(b.Stack.Tenancy.Reports(b.Env))
	res = b.tick("--metrics-file", metricsPath)
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports)
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"))
	assert.Equal(t, sha, b.Live())

	// A refused bundle: exit 1, report failed with the code, no lease, no login.
	bad := faketenancy.SampleApp(b.Env, 2)
	bad.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    privileged: true\n"
	delete(bad.Files, "config/app.toml")
	badSHA := b.Publish(bad)
	logins := countBao(b, "/login")
	res = b.tick("--metrics-file", metricsPath)
	require.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "bundle refused before the lease")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"), "a refused bundle costs no lease")
	assert.Equal(t, logins, countBao(b, "/login"), "a refused bundle costs no OpenBao login")
	rep = b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, "PRIVILEGED", rep.Code)
	assert.Equal(t, badSHA, rep.SHA)
	assert.Equal(t, sha, b.Live(), "the box keeps serving")
	m = parseMetrics(t, metricsPath)
	assert.Equal(t, 1.0, m["monky_deployd_exit_code"])
	assert.Equal(t, `{code="PRIVILEGED",result="failed"}`, labelsOf(t, metricsPath, "monky_deployd_last_result"))
	// The check-in read the live release: healthy, and each service with it.
	assert.Equal(t, 1.0, m["monky_deployd_live_known"])
	assert.Equal(t, 1.0, m["monky_deployd_live_healthy"])
	assert.Equal(t, 1.0, m[`monky_deployd_service_healthy{service="web"}`])
	assert.Equal(t, 0.0, m[`monky_deployd_service_restarts{service="web"}`])
	assert.Positive(t, m["monky_deployd_live_observed_timestamp_seconds"])

	// tenancy down: 503 on the check-in is 75, and so is a tenancy that is gone.
	b.SetDesired(faketenancy.Desired{Action: "none"})
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}})
	res = b.tick("--metrics-file", metricsPath)
	assert.Equal(t, deployd.ExitTemporary, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "level=WARN")
	assert.Equal(t, 75.0, parseMetrics(t, metricsPath)["monky_deployd_exit_code"])
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
	res = b.tick()
	require.Equal(t, 0, res.Code, res.Stderr)

	// env mismatch: the token belongs to another env → 78, then 78 again without the
	// network.
	require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(b.foreignToken("env-dev-02")+"\n"), 0o600))
	res = b.tick("--metrics-file", metricsPath)
	require.Equal(t, deployd.ExitEnvMismatch, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "AGENT_ENV_MISMATCH")
	tenancyBefore, baoBefore, dockerBefore := len(b.Stack.Tenancy.Requests()), len(b.Stack.Bao.Requests()), len(b.Docker.Calls())
	res = b.tick("--metrics-file", metricsPath)
	require.Equal(t, deployd.ExitEnvMismatch, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "not contacting the network")
	assert.Len(t, b.Stack.Tenancy.Requests(), tenancyBefore, "a latched run touches no network")
	assert.Len(t, b.Stack.Bao.Requests(), baoBefore)
	assert.Len(t, b.Docker.Calls(), dockerBefore)
	assert.Equal(t, 1.0, parseMetrics(t, metricsPath)["monky_deployd_env_mismatch_latched"])
	assert.Equal(t, 78.0, parseMetrics(t, metricsPath)["monky_deployd_exit_code"])
	assert.Equal(t, sha, b.Live())

	// bootstrap with a fresh grant of this env clears the latch.
	b.PlaceGrant()
	res = b.run([]string{"bootstrap", "--config", b.CfgPath})
	require.Equal(t, 0, res.Code, res.Stderr)
	res = b.tick()
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Nil(t, b.State().EnvMismatch)
}

func TestBinaryTenancyUnreachable(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{})
	b.Stack.Tenancy.Close()
	res := b.tick()
	assert.Equal(t, deployd.ExitTemporary, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "tenancy unavailable")
}

func TestBinaryNoCredentials(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{noGrant: true})
	res := b.tick()
	assert.Equal(t, deployd.ExitFailed, res.Code)
	assert.Contains(t, res.Stderr, "monky-deployd bootstrap")
	assert.Empty(t, b.Stack.Tenancy.Requests())
	res = b.run([]string{"bootstrap", "--config", b.CfgPath})
	assert.Equal(t, deployd.ExitFailed, res.Code)
	assert.Contains(t, res.Stderr, "bootstrap failed")
}

// TestBinaryLockHeld: a second run while one holds the lock exits 75 at once.
func TestBinaryLockHeld(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{script: &fakedockertest.Script{Commands: map[string]fakedocker.Command{"version": {Delay: fakedocker.Duration(5 * time.Second)}}}})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	first := b.start([]string{"run", "--config", b.CfgPath})
	testbox.WaitFor(t, 30*time.Second, "the first run's docker version call", func() bool { return len(b.DockerCalls("version")) > 0 })
	start := time.Now()
	res := b.tick()
	assert.Equal(t, deployd.ExitTemporary, res.Code, res.Stderr)
	assert.Less(t, time.Since(start), 4*time.Second, "exits at once")
	assert.Contains(t, res.Stderr, "holds the lock")
	assert.Equal(t, 0, first.Wait(t, 60*time.Second).Code)
}

// TestBinaryLoop: run --loop stops on 78, backs off on 75 and stops on SIGTERM with 0.
func TestBinaryLoop(t *testing.T) {
	testbox.SkipIfShort(t)
	t.Run("stops on 78", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(b.foreignToken("env-dev-02")+"\n"), 0o600))
		res := b.start([]string{"run", "--config", b.CfgPath, "--loop", "--interval", "100ms"}).Wait(t, 60*time.Second)
		assert.Equal(t, deployd.ExitEnvMismatch, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, "stopping the loop: AGENT_ENV_MISMATCH is never retried")
		assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"), "one check-in, then the loop stops")
	})

	t.Run("backs off on 75", func(t *testing.T) {
		b := newBox(t, boxOpts{nextCheckin: time.Second})
		b.SetDesired(faketenancy.Desired{Action: "none"})
		res := b.tick() // bootstrap, so that the loop only checks in
		require.Equal(t, 0, res.Code, res.Stderr)
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
		testbox.WaitFor(t, 60*time.Second, "five check-ins", func() bool { return len(checkins()) >= 6 })
		failing := checkins()[1:6]
		// Recovery: the pause goes back to tenancy's next_checkin_s (1s).
		b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
		n := len(checkins())
		testbox.WaitFor(t, 60*time.Second, "two check-ins after the recovery", func() bool { return len(checkins()) >= n+2 })
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
		res = p.Wait(t, 30*time.Second)
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

// parseMetrics parses the metrics file with Prometheus's own text parser and returns
// each metric's gauge value by name.
func parseMetrics(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // read-only
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	require.NoError(t, err, "the metrics file must parse")
	info, err := f.Stat()
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
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // read-only
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	require.NoError(t, err)
	fam, ok := fams[name]
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

// TestBinaryBootstrapGrantFlag: bootstrap --grant consumes the named grant, not the
// config's.
func TestBinaryBootstrapGrantFlag(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{noGrant: true})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	grant := filepath.Join(b.Dir, "handed-over.jwt")
	require.NoError(t, os.WriteFile(grant, []byte(b.Stack.Bao.MintGrant(b.Env)+"\n"), 0o600))
	res := b.run([]string{"bootstrap", "--config", b.CfgPath, "--grant", grant})
	require.Equal(t, 0, res.Code, res.Stderr)
	_, err := os.Stat(grant)
	assert.ErrorIs(t, err, os.ErrNotExist, "the named grant is consumed")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"), "confirmed by a check-in")
	// Used again (forced: the box is bootstrapped), the grant is gone: exit 1 with a
	// message naming the path.
	res = b.run([]string{"bootstrap", "--config", b.CfgPath, "--grant", grant, "--force"})
	assert.Equal(t, deployd.ExitFailed, res.Code)
	assert.Contains(t, res.Stderr, "handed-over.jwt")
	res = b.tick()
	assert.Equal(t, 0, res.Code, "the stored token serves the next run:\n%s", res.Stderr)
}

// TestBinaryLoopSignalDuringTick: SIGTERM while a tick of run --loop is busy ends the
// loop with 0.
func TestBinaryLoopSignalDuringTick(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{script: fastScript(map[string]fakedocker.Command{"up": {Delay: fakedocker.Duration(30 * time.Second)}})})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	p := b.start([]string{"run", "--config", b.CfgPath, "--loop", "--interval", "100ms"})
	testbox.WaitFor(t, 30*time.Second, "compose up", func() bool { return len(b.DockerCalls("up")) > 0 })
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	res := p.Wait(t, 30*time.Second)
	assert.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "stopping the loop on a signal")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/checkin"), "no further tick after the signal")
}
