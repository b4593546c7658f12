package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/internal/logging"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

const envID = "env-bench-01"

// box is one box under benchmark: a testbox.Box (the fakes, the fake docker and a
// config written for the binary), bootstrapped (a token is stored).
type box struct {
	*testbox.Box
}

// newBox builds the box from DefaultConfig (transport system, as on a box with a
// tunnel) and bootstraps it in-process.
func newBox(tb testing.TB) *box {
	tb.Helper()
	x := &box{Box: testbox.New(tb, testbox.Options{
		Env: envID,
		// Every apply of BenchmarkApply50 takes a lease: no budget to run out of.
		Stack: &fakestack.Options{LeaseBudget: 1 << 30},
		Config: func(c *deployd.Config) {
			c.Tenancy.Timeout = deployd.Duration(10 * time.Second)
			c.Compose.Project = "bench"
			c.Compose.HealthTimeout = deployd.Duration(30 * time.Second)
		},
	})}
	a := x.agent(tb, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Bootstrap(ctx, ""); err != nil {
		tb.Fatalf("bootstrap: %v", err)
	}
	return x
}

// agent builds an in-process Agent as the binary does (its own tenancy transport and
// OpenBao client, the binary's log handler at info on io.Discard). next, when set,
// receives the log records instead of the discarding handler.
func (x *box) agent(tb testing.TB, next slog.Handler, healthPoll time.Duration) *deployd.Agent {
	tb.Helper()
	if next == nil {
		next = logging.NewHandler(io.Discard, logging.Options{})
	}
	return x.NewAgent(deployd.Options{Logger: slog.New(next), Hostname: "bench", HealthPoll: healthPoll})
}

// checkins is the number of check-ins the fake tenancy answered for the box.
func (x *box) checkins() int { return len(x.Stack.Tenancy.Checkins(envID)) }

// checkinURL is the fake tenancy's check-in endpoint.
func (x *box) checkinURL() string {
	return strings.TrimRight(x.Stack.Tenancy.URL(), "/") + "/v1/agent/checkin"
}

// procEnv is the complete environment of a child process: the fake docker's.
func (x *box) procEnv() []string { return x.Docker.Env() }

// binaries builds cmd/monky-deployd and test/bench/floor once per test process, with
// the flags of packaging/build-deb.sh, and returns their paths.
func binaries(tb testing.TB) (agent, floor string) {
	tb.Helper()
	flags := []string{"-trimpath", "-buildvcs=false", "-ldflags", "-s -w"}
	return testprog.Build(tb, testprog.AgentPkg, flags...),
		testprog.Build(tb, "github.com/monky/monky-deployd/test/bench/floor", flags...)
}

// TestMain removes the binaries built for the benchmarks.
func TestMain(m *testing.M) { os.Exit(testprog.Run(m)) }

// run execs a program with env, fails tb unless it exits 0, and returns the CPU time
// (user and system) of the process and of the children it waited for.
func run(tb testing.TB, env []string, name string, args ...string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// ratio runs prepare (untimed), then work (timed) b.N times, and next to each work
// the floor with the timer stopped: after it on even iterations, before it on odd
// ones, so that neither side always inherits the other's leftovers (dirty pages, a
// warm cache). It reports floor-ns/op (the mean) and x-floor: the median over the
// iterations of work's time divided by its floor's. Interleaving makes a burst of
// load hit both sides of a pair; the median keeps a burst that hit one side only from
// moving the figure.
//
// work and floor return the CPU time of the processes they ran (0 in process). When
// the floor's is not 0, ratio also reports cpu-ns/op and floor-cpu-ns/op (means) and
// x-floor-cpu, the ratio of the sums: CPU time barely depends on the load of the
// machine, so it is the steadiest figure of a whole-process benchmark.
func ratio(b *testing.B, prepare func(), work, floor func() time.Duration) {
	b.Helper()
	var f, wCPU, fCPU time.Duration
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	timeFloor := func() time.Duration {
		t := time.Now()
		fCPU += floor()
		fi := time.Since(t)
		f += fi
		return fi
	}
	for i := range b.N {
		b.StopTimer()
		if prepare != nil {
			prepare()
		}
		var fi time.Duration
		if i%2 == 1 {
			fi = timeFloor()
		}
		b.StartTimer()
		t := time.Now()
		wCPU += work()
		w := time.Since(t)
		b.StopTimer()
		if i%2 == 0 {
			fi = timeFloor()
		}
		ratios = append(ratios, float64(w)/float64(fi))
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(f.Nanoseconds())/n, "floor-ns/op")
	b.ReportMetric(median(ratios), "x-floor")
	if fCPU > 0 {
		b.ReportMetric(float64(wCPU.Nanoseconds())/n, "cpu-ns/op")
		b.ReportMetric(float64(fCPU.Nanoseconds())/n, "floor-cpu-ns/op")
		b.ReportMetric(float64(wCPU)/float64(fCPU), "x-floor-cpu")
	}
}

// inProcess adapts an in-process func to ratio: it uses no process CPU time.
func inProcess(f func()) func() time.Duration {
	return func() time.Duration { f(); return 0 }
}

// median returns the median of v (which it sorts); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}
