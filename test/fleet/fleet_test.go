package fleet

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

var (
	flagAgents   = flag.Int("fleet.agents", 0, "boxes in the fleet (0: skip the fleet); the figures use 500 and 1000, CI 300")
	flagInterval = flag.Duration("fleet.interval", 2*time.Second, "the loops' interval and tenancy's next_checkin_s, whole seconds (production: 1m)")
	flagOutage   = flag.Duration("fleet.outage", 12*time.Second, "how long every check-in answers 503")
	flagReport   = flag.String("fleet.report", "", "write the figures as JSON to this file")
)

// leaseBudget is tenancy's budget per environment and hour (docs/PROTOCOL.md).
const leaseBudget = 5

// fleetFigures is what one run of the scenario measured.
type fleetFigures struct {
	Mode     string `json:"mode"`
	Agents   int    `json:"agents"`
	Interval string `json:"interval"`
	Outage   string `json:"outage"`
	// Start: the first check-in of every box after they all started together.
	Start spread `json:"start"`
	// Steady: check-ins per 100 ms over the intervals before the publish.
	Steady rate `json:"steady"`
	// Publish: from each environment's publish to its applied report.
	Publish spread `json:"publish"`
	// Outage: what tenancy received while it answered 503.
	OutageCheckins int `json:"outage_checkins"`
	OutagePeak     int `json:"outage_peak_per_100ms"`
	// Recovery: from the end of the outage to each box's first answered check-in.
	Recovery spread `json:"recovery"`
	// RecoveryRate: check-ins per 100 ms in the first seconds after the recovery.
	RecoveryRate rate `json:"recovery_rate"`
	// RecoveryHistogram: check-ins per 250 ms from the recovery on.
	RecoveryHistogram []int `json:"recovery_per_250ms"`
	// TickP95: the 95th percentile of tick durations in the recovery wave, ms.
	TickP95Recovery float64 `json:"tick_p95_ms_recovery"`
	TickP95Steady   float64 `json:"tick_p95_ms_steady"`
	// Leases: the most leases any environment got, against the budget.
	MaxLeases int         `json:"max_leases_per_env"`
	Ticks     map[int]int `json:"ticks_by_exit"`
}

// spread is how long it took until 50, 95 and 100 % of the boxes did something.
type spread struct {
	P50  float64 `json:"p50_s"`
	P95  float64 `json:"p95_s"`
	P100 float64 `json:"p100_s"`
	N    int     `json:"n"`
}

// rate is the mean and the peak of check-ins per 100 ms over a window.
type rate struct {
	MeanPer100ms float64 `json:"mean_per_100ms"`
	PeakPer100ms int     `json:"peak_per_100ms"`
	PeakPerSec   int     `json:"peak_per_s"`
}

func TestFleet(t *testing.T) {
	testprog.SkipIfShort(t)
	if *flagAgents <= 0 {
		t.Skip("the fleet runs when given a size: go test -count=1 -v -run '^TestFleet$' ./test/fleet/ -fleet.agents=300 (500 for the figures of docs/OPERATIONS.md, 1000 for docs/BENCHMARKS.md)")
	}
	if *flagInterval < time.Second || *flagInterval%time.Second != 0 {
		t.Fatalf("-fleet.interval must be whole seconds (next_checkin_s): %s", *flagInterval)
	}
	var all []fleetFigures
	for _, mode := range []struct {
		name string
		rnd  func(int64) int64
	}{
		{"jitter", nil},
		{"no jitter", func(n int64) int64 { return n / 2 }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := runFleet(t, mode.name, mode.rnd)
			out, _ := json.MarshalIndent(f, "", "  ")
			t.Logf("fleet figures, %s:\n%s", mode.name, out)
			all = append(all, f)
		})
	}
	if *flagReport != "" {
		out, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(*flagReport, append(out, '\n'), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// member is one box of the fleet.
type member struct {
	env   string
	cfg   deployd.Config
	agent *deployd.Agent
	ticks []tickRec // written by its own loop only
	code  int       // the loop's exit code
}

type tickRec struct {
	start time.Time
	dur   time.Duration
	code  int
	err   error
}

func envID(i int) string { return fmt.Sprintf("env-fleet%d-%02d", i/100, i%100) }

func runFleet(t *testing.T, mode string, rnd func(int64) int64) fleetFigures {
	n, interval, outage := *flagAgents, *flagInterval, *flagOutage
	stack := deploydtest.NewStack(t, &fakestack.Options{LeaseBudget: leaseBudget, LeaseWindow: time.Hour, NextCheckin: interval})

	// The boxes and their bundles, made before anything is timed: testbox boxes on the
	// shared fakes, with DefaultConfig's project and releases, their agents' log
	// discarded.
	members := make([]*member, n)
	bundles := make([][]byte, n)
	defaults := deployd.DefaultConfig().Compose
	for i := range n {
		env := envID(i)
		box := testbox.New(t, testbox.Options{Env: env, SharedStack: stack, Config: func(c *deployd.Config) {
			c.Tenancy.Timeout = deployd.Duration(10 * time.Second)
			c.Compose.Project = defaults.Project
			c.Compose.KeepReleases = defaults.KeepReleases
			c.Compose.HealthTimeout = deployd.Duration(time.Minute)
		}})
		a := box.NewAgent(deployd.Options{Logger: slog.New(slog.DiscardHandler), Hostname: env})
		members[i] = &member{env: env, agent: a, cfg: box.Cfg}
		b, err := faketenancy.BuildBundle(faketenancy.BundleSpec{EnvID: env, Serial: 1})
		if err != nil {
			t.Fatal(err)
		}
		bundles[i] = b.Data
	}

	// 1. Every box starts at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, m := range members {
		wg.Go(func() {
			m.code = m.agent.Loop(ctx, deployd.LoopOptions{Interval: interval, Rand: rnd, Tick: func(ctx context.Context) int {
				start := time.Now()
				_, err := m.agent.Tick(ctx)
				code := deployd.ExitCode(err)
				m.ticks = append(m.ticks, tickRec{start: start, dur: time.Since(start), code: code, err: err})
				return code
			}})
		})
	}
	stopAll := func() {
		cancel()
		wg.Wait()
		for _, m := range members {
			_ = m.agent.Close()
		}
	}
	defer stopAll()

	f := fleetFigures{Mode: mode, Agents: n, Interval: interval.String(), Outage: outage.String(), Ticks: map[int]int{}}
	firstOK := func(from time.Time) []time.Duration {
		seen := map[string]time.Duration{}
		for _, r := range stack.Tenancy.Requests() {
			if r.Path != "/v1/agent/checkin" || r.Status != 200 || r.Time.Before(from) {
				continue
			}
			if _, ok := seen[r.EnvID]; !ok {
				seen[r.EnvID] = r.Time.Sub(from)
			}
		}
		return slices.Collect(maps.Values(seen))
	}
	waitFor := func(what string, bound time.Duration, done func() bool) {
		if !waitUntil(bound, done) {
			t.Fatalf("%s: not within %s", what, bound)
		}
	}
	startBound := 30*time.Second + time.Duration(n)*20*time.Millisecond
	waitFor("every box checked in after the start", startBound, func() bool { return len(firstOK(t0)) == n })
	f.Start = spreadOf(firstOK(t0), n)

	// The steady state: five intervals of idle ticks.
	steadyFrom := time.Now()
	time.Sleep(5 * interval)
	steadyTo := time.Now()
	f.Steady = rateOf(checkinTimes(stack, steadyFrom, steadyTo, 200), steadyFrom, steadyTo)

	// 2. A bundle for every environment, published as fast as the fake takes them.
	published := make(map[string]time.Time, n)
	for i, m := range members {
		if _, _, err := stack.Tenancy.PublishBundle(m.env, bundles[i]); err != nil {
			t.Fatal(err)
		}
		published[m.env] = time.Now()
	}
	applied := func() []time.Duration {
		var out []time.Duration
		for _, m := range members {
			for _, r := range stack.Tenancy.Reports(m.env) {
				if r.Result == "applied" {
					out = append(out, r.Time.Sub(published[m.env]))
					break
				}
			}
		}
		return out
	}
	// Every apply runs the fake docker program (two processes per box) and the health
	// wait on the same 2 cores: the bound grows by 100 ms a box (190 s at 1,000, where
	// the quiet machine's slowest box applied after 76 s).
	publishBound := 90*time.Second + time.Duration(n)*100*time.Millisecond
	if !waitUntil(publishBound, func() bool { return len(applied()) == n }) {
		var late []string
		for _, m := range members {
			if !slices.ContainsFunc(stack.Tenancy.Reports(m.env), func(r faketenancy.Report) bool { return r.Result == "applied" }) {
				late = append(late, m.env)
			}
		}
		for _, env := range late[:min(3, len(late))] {
			m := members[slices.IndexFunc(members, func(m *member) bool { return m.env == env })]
			t.Logf("%s has not applied; its ticks and requests:\n%s", env, history(stack, m))
		}
		t.Fatalf("every box applied the bundle: not within %s; %d of %d have not: %s", publishBound, len(late), n, strings.Join(late[:min(20, len(late))], " "))
	}
	f.Publish = spreadOf(applied(), n)
	time.Sleep(2 * interval)

	// 3. The outage.
	outFrom := time.Now()
	stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}})
	time.Sleep(outage)
	stack.Tenancy.SetFaults(faketenancy.Faults{})
	recovered := time.Now()
	during := checkinTimes(stack, outFrom, recovered, 503)
	f.OutageCheckins = len(during)
	f.OutagePeak = rateOf(during, outFrom, recovered).PeakPer100ms
	// the longest a box can wait: its back-off after the outage, ±10 %, plus a margin
	waitFor("every box checked in after the outage", 2*outage+30*time.Second+2*interval, func() bool { return len(firstOK(recovered)) == n })
	f.Recovery = spreadOf(firstOK(recovered), n)
	wave := time.Duration(math.Ceil(f.Recovery.P100))*time.Second + interval
	time.Sleep(max(0, time.Until(recovered.Add(wave))))
	after := checkinTimes(stack, recovered, recovered.Add(wave), 200)
	f.RecoveryRate = rateOf(after, recovered, recovered.Add(wave))
	f.RecoveryHistogram = histogram(after, recovered, 250*time.Millisecond, int(wave/(250*time.Millisecond)))

	stopAll()
	for _, m := range members {
		if m.code != deployd.ExitOK {
			t.Errorf("%s: the loop ended with %d, want 0", m.env, m.code)
		}
		for _, tr := range m.ticks {
			f.Ticks[tr.code]++
		}
	}
	for code := range f.Ticks {
		if !slices.Contains([]int{deployd.ExitOK, deployd.ExitFailed, deployd.ExitTemporary, deployd.ExitEnvMismatch}, code) {
			t.Errorf("a tick exited %d, not in the contract", code)
		}
	}
	f.TickP95Steady = tickP95(members, steadyFrom, steadyTo)
	f.TickP95Recovery = tickP95(members, recovered, recovered.Add(wave))

	// 4. Leases: one per environment (one publish), never past the budget.
	for _, m := range members {
		ls := stack.Tenancy.Leases(m.env)
		f.MaxLeases = max(f.MaxLeases, len(ls))
		if len(ls) > leaseBudget {
			t.Errorf("%s: %d leases, budget %d per hour", m.env, len(ls), leaseBudget)
		}
		if len(ls) != 1 {
			t.Errorf("%s: %d leases for one publish, want 1; its ticks and requests:\n%s", m.env, len(ls), history(stack, m))
		}
	}

	// 5. A slow box is not a bad bundle: no report failed, no sha remembered as failed.
	for _, m := range members {
		for _, r := range stack.Tenancy.Reports(m.env) {
			if r.Result != "applied" {
				t.Errorf("%s: reported %s %s (%s), want only applied; its ticks and requests:\n%s", m.env, r.Result, r.Code, r.Detail, history(stack, m))
			}
		}
		st, err := deployd.ReadState(m.cfg)
		if err != nil {
			t.Errorf("%s: %v", m.env, err)
		} else if len(st.Failed) > 0 {
			t.Errorf("%s: %d shas remembered as failed, want none", m.env, len(st.Failed))
		}
	}
	return f
}

// waitUntil polls done every 100 ms until it holds (true) or bound passes (false).
func waitUntil(bound time.Duration, done func() bool) bool {
	deadline := time.Now().Add(bound)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// history is what one box did and what tenancy saw of it, for a failure's message.
func history(s *fakestack.Stack, m *member) string {
	var b strings.Builder
	for _, tr := range m.ticks {
		if tr.err != nil {
			fmt.Fprintf(&b, "  %s tick %s exit %d %s: %v\n", tr.start.Format("15:04:05.000"), tr.dur.Round(time.Millisecond), tr.code, deployd.CodeOf(tr.err), tr.err)
		}
	}
	for _, r := range s.Tenancy.Requests() {
		if r.EnvID == m.env && r.Path != "/v1/agent/checkin" {
			fmt.Fprintf(&b, "  %s %s %s %d\n", r.Time.Format("15:04:05.000"), r.Method, r.Path, r.Status)
		}
	}
	return b.String()
}

// checkinTimes returns the times of check-ins answered with status in [from, to).
func checkinTimes(s *fakestack.Stack, from, to time.Time, status int) []time.Time {
	var out []time.Time
	for _, r := range s.Tenancy.Requests() {
		if r.Path == "/v1/agent/checkin" && r.Status == status && !r.Time.Before(from) && r.Time.Before(to) {
			out = append(out, r.Time)
		}
	}
	return out
}

// spreadOf gives the 50th, 95th and 100th percentile of ds, of a fleet of n.
func spreadOf(ds []time.Duration, n int) spread {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(p float64) float64 {
		if len(ds) == 0 {
			return -1
		}
		i := int(math.Ceil(p*float64(n))) - 1
		if i >= len(ds) {
			return -1 // fewer than p of the fleet got there
		}
		return math.Round(ds[max(i, 0)].Seconds()*1000) / 1000
	}
	return spread{P50: at(0.50), P95: at(0.95), P100: at(1), N: len(ds)}
}

// rateOf is the mean and peak number of ts per 100 ms (and the peak per second) in
// [from, to).
func rateOf(ts []time.Time, from, to time.Time) rate {
	buckets := histogram(ts, from, 100*time.Millisecond, int(to.Sub(from)/(100*time.Millisecond))+1)
	var r rate
	for _, b := range buckets {
		r.PeakPer100ms = max(r.PeakPer100ms, b)
	}
	for i := range buckets {
		s := 0
		for j := i; j < min(i+10, len(buckets)); j++ {
			s += buckets[j]
		}
		r.PeakPerSec = max(r.PeakPerSec, s)
	}
	if d := to.Sub(from); d > 0 {
		r.MeanPer100ms = math.Round(float64(len(ts))/(d.Seconds()*10)*10) / 10
	}
	return r
}

// histogram counts ts in k buckets of width w from from on.
func histogram(ts []time.Time, from time.Time, w time.Duration, k int) []int {
	out := make([]int, max(k, 0))
	for _, t := range ts {
		if i := int(t.Sub(from) / w); i >= 0 && i < len(out) {
			out[i]++
		}
	}
	return out
}

// tickP95 is the 95th percentile of the duration of the ticks started in [from, to), ms.
func tickP95(members []*member, from, to time.Time) float64 {
	var ds []time.Duration
	for _, m := range members {
		for _, tr := range m.ticks {
			if !tr.start.Before(from) && tr.start.Before(to) {
				ds = append(ds, tr.dur)
			}
		}
	}
	if len(ds) == 0 {
		return -1
	}
	slices.Sort(ds)
	return math.Round(float64(ds[int(math.Ceil(0.95*float64(len(ds))))-1].Microseconds())/100) / 10
}
