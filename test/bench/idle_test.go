package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/logging"
)

// idleBox is a bootstrapped box whose check-ins answer none: a box between deploys.
func idleBox(b *testing.B) *box {
	b.Helper()
	x := newBox(b)
	x.Stack.Tenancy.SetDesired(envID, faketenancy.Desired{Action: "none"})
	return x
}

// liveBox is an idle box with a live release (applied in-process): its idle ticks
// read the live release's health for the check-in's live object.
func liveBox(b *testing.B) *box {
	b.Helper()
	x := newBox(b)
	x.Publish(faketenancy.SampleApp(envID, 1))
	a := x.agent(b, nil, 10*time.Millisecond)
	if out, err := a.Tick(context.Background()); err != nil || out.Result != "applied" {
		b.Fatalf("apply: result %q: %v", out.Result, err)
	}
	x.Stack.Tenancy.SetDesired(envID, faketenancy.Desired{Action: "none"})
	return x
}

// expectLive fails b unless the agent's last check-in (the floor's carry none)
// carried a healthy live object.
func expectLive(b *testing.B, x *box) {
	b.Helper()
	cs := x.Stack.Tenancy.Checkins(envID)
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Host.Hostname == "floor" {
			continue
		}
		if l := cs[i].Live; l == nil || l.Healthy == nil || !*l.Healthy || len(l.Services) == 0 {
			b.Fatalf("the agent's last check-in carried no healthy live object: %+v", l)
		}
		return
	}
	b.Fatal("no check-in of the agent")
}

// agentRun returns a func that runs `monky-deployd run --config …` as a process
// with the fake docker's environment and extra.
func agentRun(b *testing.B, x *box, extra ...string) func() time.Duration {
	bin, _ := binaries(b)
	env := append(x.procEnv(), extra...)
	return func() time.Duration { return run(b, env, bin, "run", "--config", x.CfgPath) }
}

// floorRun returns a func that runs the floor program as a process against the box's
// check-in URL with the box's stored token.
func floorRun(b *testing.B, x *box) func() time.Duration {
	_, bin := binaries(b)
	env := x.procEnv()
	args := []string{"-url", x.checkinURL(), "-token-file", x.Cfg.TokenPath(), "-env", envID}
	return func() time.Duration { return run(b, env, bin, args...) }
}

// expectCheckins fails b unless the fake tenancy counted want check-ins since before.
func expectCheckins(b *testing.B, x *box, before, want int) {
	b.Helper()
	if got := x.checkins() - before; got != want {
		b.Fatalf("the fake tenancy counted %d check-ins, want %d: a run did not check in", got, want)
	}
}

// BenchmarkIdleTick is the timer's idle tick as a whole process, as the unit runs
// it: `monky-deployd run` on a box with nothing live (exec, config, state, token
// lookup, check-in with action none, state save, exit 0). Floor: the floor program's
// one POST, run next to each tick.
func BenchmarkIdleTick(b *testing.B) {
	x := idleBox(b)
	idleProcess(b, x, agentRun(b, x), false)
}

// BenchmarkIdleTickLive is the timer's idle tick on a box with a live release, as
// the unit runs it: `monky-deployd run`, which reads the live release's health
// (Engine API: the containers, and an inspection only of what may have restarted
// since the last check-in), checks in with it and saves the state. Floor: the same
// one POST.
func BenchmarkIdleTickLive(b *testing.B) {
	x := liveBox(b)
	idleProcess(b, x, agentRun(b, x), true)
}

// idleProcess measures run, an idle tick as a process, against the floor: one run of
// each to warm up (the page cache holds the binaries, the state file exists), then
// the pairs; every run must have checked in, with a healthy live object when live,
// and the docker processes per op are reported.
func idleProcess(b *testing.B, x *box, run func() time.Duration, live bool) {
	floor := floorRun(b, x)
	run()
	floor()
	calls := len(x.DockerCalls(""))
	before := x.checkins()
	ratio(b, nil, run, floor)
	expectCheckins(b, x, before, 2*b.N)
	if live {
		expectLive(b, x)
	}
	reportExecs(b, x, calls)
}

// idleInProcess measures Agent.Tick with action none in the benchmark process, the
// agent kept across ticks, against one check-in POST with a keep-alive client: one of
// each to warm up, then the pairs; every tick must have checked in, with a healthy
// live object when live.
func idleInProcess(b *testing.B, x *box, live bool) {
	a := x.agent(b, nil, 0)
	tick := func() {
		out, err := a.Tick(context.Background())
		if err != nil || out.Action != "none" {
			b.Fatalf("tick: action %q, exit %d: %v", out.Action, deployd.ExitCode(err), err)
		}
	}
	p := newPoster(b, x)
	tick()
	p.post()
	before := x.checkins()
	ratio(b, nil, inProcess(tick), inProcess(p.post))
	expectCheckins(b, x, before, 2*b.N)
	if live {
		expectLive(b, x)
	}
}

// reportExecs reports the docker processes (not Engine API reads) per op since calls.
func reportExecs(b *testing.B, x *box, calls int) {
	execs := 0
	for _, c := range x.DockerCalls("")[calls:] {
		if c.Argv[0] != "engine" {
			execs++
		}
	}
	b.ReportMetric(float64(execs)/float64(b.N), "docker-execs/op")
}

// BenchmarkIdleTickLiveInProcess is the --loop idle tick with a live release:
// Agent.Tick in the benchmark process, the agent kept across ticks. Floor: one
// check-in POST with a keep-alive client.
func BenchmarkIdleTickLiveInProcess(b *testing.B) {
	idleInProcess(b, liveBox(b), true)
}

// BenchmarkIdleTickNoSystemRoots is BenchmarkIdleTick with SSL_CERT_FILE and
// SSL_CERT_DIR naming an empty file and an empty directory, so that the agent's
// x509.SystemCertPool finds nothing to parse. The tenancy URL of the benchmark is
// plain http on loopback, so the pool is never used: the difference to
// BenchmarkIdleTick is what loading the system roots costs a tick of the agent
// binary (see docs/BENCHMARKS.md).
func BenchmarkIdleTickNoSystemRoots(b *testing.B) {
	x := idleBox(b)
	empty := b.TempDir()
	none := filepath.Join(empty, "none.pem")
	if err := os.WriteFile(none, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	agent := agentRun(b, x, "SSL_CERT_FILE="+none, "SSL_CERT_DIR="+empty)
	floor := floorRun(b, x)
	agent()
	floor()
	before := x.checkins()
	ratio(b, nil, agent, floor)
	expectCheckins(b, x, before, 2*b.N)
}

// BenchmarkIdleTickFloor is the floor alone: one process, one POST.
func BenchmarkIdleTickFloor(b *testing.B) {
	x := idleBox(b)
	floor := floorRun(b, x)
	floorAlone(b, x, func() { floor() })
}

// floorAlone measures floor alone after one run to warm up; every run must have
// checked in.
func floorAlone(b *testing.B, x *box, floor func()) {
	floor()
	before := x.checkins()
	b.ResetTimer()
	for range b.N {
		floor()
	}
	b.StopTimer()
	expectCheckins(b, x, before, b.N)
}

// BenchmarkStartup is `monky-deployd version` as a process: the start and package
// initialisation every timer tick pays before it does anything. Floor: as for
// BenchmarkIdleTick, which makes the two comparable.
func BenchmarkStartup(b *testing.B) {
	x := idleBox(b)
	bin, _ := binaries(b)
	env := x.procEnv()
	version := func() time.Duration { return run(b, env, bin, "version") }
	floor := floorRun(b, x)
	version()
	floor()
	ratio(b, nil, version, floor)
}

// BenchmarkIdleTickInProcess is Agent.Tick with action none in the benchmark process:
// the tick without the process start. Floor: one check-in POST with a keep-alive client.
func BenchmarkIdleTickInProcess(b *testing.B) {
	idleInProcess(b, idleBox(b), false)
}

// BenchmarkIdleTickCold is what `run` does in process, from the config file on:
// LoadConfig, deployd.New (transport, clients, redactor), one tick, Close. The gap to
// BenchmarkIdleTickInProcess is the cost of building an agent, which a timer tick pays
// every time, including the `docker version` subprocess (the Agent caches it, so a new
// Agent runs it again: docker-execs/op). The system certificate pool, which crypto/x509
// caches per process, stays warm here: BenchmarkIdleTick minus BenchmarkStartup minus
// this is mostly its loading. Floor: as BenchmarkIdleTickInProcess.
func BenchmarkIdleTickCold(b *testing.B) {
	x := idleBox(b)
	tick := func() {
		cfg, err := deployd.LoadConfig(x.CfgPath)
		if err != nil {
			b.Fatal(err)
		}
		a, err := deployd.New(context.Background(), cfg, deployd.Options{
			Logger:    slog.New(logging.NewHandler(io.Discard, logging.Options{})),
			DockerEnv: x.Docker.Env(),
			Hostname:  "bench",
		})
		if err != nil {
			b.Fatal(err)
		}
		out, err := a.Tick(context.Background())
		if err != nil || out.Action != "none" {
			b.Fatalf("tick: action %q, exit %d: %v", out.Action, deployd.ExitCode(err), err)
		}
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
	}
	p := newPoster(b, x)
	tick()
	p.post()
	calls := len(x.DockerCalls(""))
	before := x.checkins()
	ratio(b, nil, inProcess(tick), inProcess(p.post))
	expectCheckins(b, x, before, 2*b.N)
	b.ReportMetric(float64(len(x.DockerCalls(""))-calls)/float64(b.N), "docker-execs/op")
}

// BenchmarkIdleTickInProcessFloor is the in-process floor alone.
func BenchmarkIdleTickInProcessFloor(b *testing.B) {
	x := idleBox(b)
	floorAlone(b, x, newPoster(b, x).post)
}

// poster sends the in-process floor's check-in: the floor program's request, with a
// client that keeps its connection as the agent's does.
type poster struct {
	tb     testing.TB
	client *http.Client
	url    string
	bearer string
	body   []byte
}

func newPoster(tb testing.TB, x *box) *poster {
	tb.Helper()
	tok, err := os.ReadFile(x.Cfg.TokenPath())
	if err != nil {
		tb.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{
		"env_id": envID, "agent_version": "0.0.0-floor", "current_sha": strings.Repeat("0", 64),
		"current_serial": 1, "last_result": "applied", "last_code": "",
		"host": map[string]any{"hostname": "floor", "docker_version": "27.3.1", "free_mb": 4096},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // loopback only, whatever the environment says
	tb.Cleanup(tr.CloseIdleConnections)
	return &poster{tb: tb, client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		url: x.checkinURL(), bearer: strings.TrimSpace(string(tok)), body: body}
}

func (p *poster) post() {
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(p.body))
	if err != nil {
		p.tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		p.tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		p.tb.Fatalf("floor check-in answered %d", resp.StatusCode)
	}
}

// BenchmarkDockerVersion is the `docker version` subprocess that every timer tick
// runs to fill the check-in's docker_version, because the agent caches the answer in
// the Agent value, which lives for one process (docker-execs/op of BenchmarkIdleTick).
// This is the fake docker; the real CLI also asks the daemon, so it costs more.
func BenchmarkDockerVersion(b *testing.B) {
	x := idleBox(b)
	cc, err := compose.New(compose.Config{Docker: x.Docker.Path, Project: "bench", Dir: x.Dir, Env: x.Docker.Env()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		v, err := cc.DockerVersion(context.Background())
		if err != nil || v == "" {
			b.Fatalf("docker version %q: %v", v, err)
		}
	}
}
