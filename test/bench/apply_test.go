package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/logging"
)

// applyServices is the size of the bundle of BenchmarkApply50.
const applyServices = 50

// healthPoll is the pause between two ps calls of the health wait; the fake docker
// answers healthy at once, so it is never slept unless something is wrong.
const healthPoll = 10 * time.Millisecond

// applier applies a new serial of a bundle of n services per call.
type applier struct {
	tb     testing.TB
	x      *box
	a      *deployd.Agent
	rec    recorder
	n      int
	serial int64
	// data and sha are the bundle published last, for the floor.
	data []byte
	sha  string
	// spent sums the phases of applyPhases over the applies.
	spent []time.Duration
}

func newApplier(tb testing.TB, n int) *applier {
	tb.Helper()
	x := newBox(tb)
	rec := newRecorder(logging.NewHandler(io.Discard, logging.Options{}))
	return &applier{tb: tb, x: x, a: x.agent(tb, rec, healthPoll), rec: rec, n: n,
		spent: make([]time.Duration, len(applyPhases))}
}

// publish makes the next serial desired (untimed: it is tenancy's work).
func (p *applier) publish() {
	p.serial++
	spec := faketenancy.SampleServices(envID, p.serial, p.n)
	spec.Gzip = true
	p.data = deploydtest.MakeBundle(p.tb, spec).Data
	var err error
	if p.sha, _, err = p.x.Stack.Tenancy.PublishBundle(envID, p.data); err != nil {
		p.tb.Fatal(err)
	}
	p.rec.take()
}

// apply ticks once and fails unless the tick applied the published sha with a lease.
func (p *applier) apply() {
	start := time.Now()
	out, err := p.a.Tick(context.Background())
	end := time.Now()
	if err != nil || out.Result != "applied" || out.SHA != p.sha || !out.Leased {
		p.tb.Fatalf("apply of serial %d: action %q result %q code %q leased %t exit %d: %v",
			p.serial, out.Action, out.Result, out.Code, out.Leased, deployd.ExitCode(err), err)
	}
	d, err := split(applyPhases, p.rec.take(), start, end)
	if err != nil {
		p.tb.Fatal(err)
	}
	for i := range d {
		p.spent[i] += d[i]
	}
}

// report adds the mean of each phase as a metric.
func (p *applier) report(b *testing.B, runs int) {
	for i, ph := range applyPhases {
		b.ReportMetric(float64(p.spent[i].Nanoseconds())/float64(runs), ph.name+"-ns/op")
	}
}

// applyFloor is the work no apply can skip, done directly on the bundle bytes:
// bundle.Verify, bundle.Extract into a fresh directory, one `docker compose up` and
// one `docker compose ps` of a fake docker of its own (its state is apart from the
// agent's), then the directory removed as prune would.
type applyFloor struct {
	tb     testing.TB
	docker *fakedocker.Docker
	root   string
	n      int
	// inVerify and inDocker sum the two halves of the floor.
	inVerify, inDocker time.Duration
}

func newApplyFloor(tb testing.TB, n int) *applyFloor {
	tb.Helper()
	return &applyFloor{tb: tb, docker: deploydtest.NewDocker(tb, nil), root: tb.TempDir(), n: n}
}

func (f *applyFloor) run(data []byte, sha string) {
	tb := f.tb
	ctx := context.Background()
	t0 := time.Now()
	res, err := bundle.Verify(ctx, bytes.NewReader(data), bundle.Expect{EnvID: envID, SHA: sha})
	if err != nil {
		tb.Fatalf("floor verify: %v", err)
	}
	dir := filepath.Join(f.root, sha)
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := bundle.Extract(ctx, bytes.NewReader(data), dir, sha, bundle.Limits{}); err != nil {
		tb.Fatalf("floor extract: %v", err)
	}
	t1 := time.Now()
	cc, err := compose.New(compose.Config{Docker: f.docker.Path, Project: "bench", Dir: dir,
		Files: res.Manifest.ComposeFiles, Env: f.docker.Env()})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := cc.Up(ctx); err != nil {
		tb.Fatalf("floor up: %v", err)
	}
	cs, err := cc.PS(ctx)
	if err != nil || len(cs) != f.n {
		tb.Fatalf("floor ps: %d containers, want %d: %v", len(cs), f.n, err)
	}
	t2 := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	f.inVerify += t1.Sub(t0)
	f.inDocker += t2.Sub(t1)
}

// BenchmarkApply50 applies a new serial of a 50-service bundle per iteration, in
// process, with the fake docker: check-in, download, verify, lease, OpenBao login,
// stage, promote, compose up, health, report, prune. Publishing is untimed. It reports
// the split by phase and x-floor against applyFloor, run next to each apply.
func BenchmarkApply50(b *testing.B) {
	p := newApplier(b, applyServices)
	f := newApplyFloor(b, applyServices)
	p.publish()
	p.apply() // warm: the docker version is cached, a release is live
	f.run(p.data, p.sha)
	clear(p.spent)
	ratio(b, p.publish, inProcess(p.apply), inProcess(func() { f.run(p.data, p.sha) }))
	p.report(b, b.N)
}

// BenchmarkApply50Floor is applyFloor alone, split into verify+extract and the two
// docker calls.
func BenchmarkApply50Floor(b *testing.B) {
	p := newApplier(b, applyServices)
	f := newApplyFloor(b, applyServices)
	p.publish()
	f.run(p.data, p.sha)
	f.inVerify, f.inDocker = 0, 0
	b.ResetTimer()
	for range b.N {
		f.run(p.data, p.sha)
	}
	b.StopTimer()
	b.ReportMetric(float64(f.inVerify.Nanoseconds())/float64(b.N), "verify+extract-ns/op")
	b.ReportMetric(float64(f.inDocker.Nanoseconds())/float64(b.N), "docker-ns/op")
}
