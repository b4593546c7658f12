package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
	flagDuration = flag.Duration("soak.duration", 0, "run the soak this long (0: skip it); CI runs 1m")
	flagSeed     = flag.Uint64("soak.seed", 0, "seed of the fault schedule (0: from the clock; printed)")
	flagInterval = flag.Duration("soak.interval", 500*time.Millisecond, "the agents' --interval (the base of the back-off)")
	flagRestart  = flag.Duration("soak.restart-every", 0, "mean time between restarts of each agent (0: max(duration/8, 15s))")
	flagFaults   = flag.Duration("soak.fault-every", 4*time.Second, "mean time between two faults or events")
	flagSample   = flag.Duration("soak.sample", time.Second, "sampling period")
	flagReport   = flag.String("soak.report", "", "write the figures as JSON to this file")
	flagSamples  = flag.String("soak.samples", "", "write every sample as CSV (series,segment,seconds,value) to this file")
)

const (
	// leaseBudget and leaseWindow are the fake tenancy's budget: tighter than
	// production's 5 per hour so that the budget is hit during a soak of minutes.
	leaseBudget = 3
	leaseWindow = time.Minute
	// nextCheckin is what the fake tenancy answers as next_checkin_s.
	nextCheckin = time.Second

	// The limits of the slopes after warm-up (see the gate in stats_test.go and
	// docs/OPERATIONS.md, "A soak: the agent over time"). A leak of one fd or
	// goroutine per tick is thousands per hour at this pace; one per apply is over a
	// hundred.
	limitAnonMiBPerHour = 8
	limitFDsPerHour     = 5
	limitGoroutines     = 5
	// The allowances: the rise over one process's sampled life that a healthy agent
	// makes once — the heap growing to its GC target after the first apply (about
	// 2 MiB: the binary idles at 24 MiB and applies at 26), one more kept-alive
	// connection (an fd; two goroutines).
	allowAnonMiB    = 4
	allowFDs        = 3
	allowGoroutines = 3
)

// figures is what a soak reports.
type figures struct {
	Seed            uint64            `json:"seed"`
	Duration        string            `json:"duration"`
	Warmup          string            `json:"warmup"`
	Samples         int               `json:"samples"`
	Anon            slopeFigure       `json:"anon_mib"`
	FDs             slopeFigure       `json:"fds"`
	Threads         slopeFigure       `json:"threads"`
	Goroutines      slopeFigure       `json:"goroutines_outside_fake_servers"`
	GoroutinesTotal slopeFigure       `json:"goroutines_total"`
	BinaryTicks     map[int]int       `json:"binary_ticks_by_exit"`
	InprocTicks     map[int]int       `json:"inproc_ticks_by_exit"`
	BinaryExits     map[string]int    `json:"binary_process_exits"`
	Restarts        map[string]int    `json:"restarts"`
	Leases          map[string]int    `json:"leases"`
	MaxInWindow     map[string]int    `json:"max_leases_in_a_window"`
	Budget          string            `json:"budget"`
	Reports         map[string]int    `json:"reports"`
	Faults          map[string]int    `json:"faults_and_events"`
	Canaries        int               `json:"canaries"`
	CanaryInEnv     int               `json:"env_files_with_a_canary"`
	Final           map[string]string `json:"last_bundle"`
	GoroutinesAtEnd map[string]int    `json:"goroutines_outside_fake_servers_at_end_by_creator"`
}

type slopeFigure struct {
	N        int     `json:"n"`
	Segments int     `json:"segments"`
	Slope    float64 `json:"slope_per_hour"`
	SE       float64 `json:"se_per_hour"`
	Mean     float64 `json:"mean"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	Limit    float64 `json:"limit_per_hour,omitempty"`
	SpanH    float64 `json:"longest_segment_h"`
	Rise     float64 `json:"rise_over_longest_segment"`
	Allow    float64 `json:"allowance,omitempty"`
	// Effective is the growth per hour the gate lets pass at most: the limit plus three
	// standard errors, or the allowance spread over the longest segment, whichever is
	// larger.
	Effective float64 `json:"effective_limit_per_hour,omitempty"`
	Pass      *bool   `json:"flat,omitempty"`
}

func figure(f fit, limit, allowance float64) slopeFigure {
	sf := slopeFigure{N: f.n, Segments: f.segments, Slope: round(f.slope), SE: round(f.se), Mean: round(f.mean), Min: f.min, Max: f.max,
		Limit: limit, SpanH: round(f.span), Rise: round(f.slope * f.span), Allow: allowance}
	if limit > 0 {
		pass := f.gate(limit, allowance)
		sf.Pass = &pass
		sf.Effective = round(limit + 3*f.se)
		if f.span > 0 {
			sf.Effective = round(math.Max(limit+3*f.se, allowance/f.span))
		}
	}
	return sf
}

func round(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return -1
	}
	return math.Round(v*1000) / 1000
}

func TestSoak(t *testing.T) {
	testprog.SkipIfShort(t)
	if *flagDuration <= 0 {
		t.Skip("the soak runs when given a duration: go test -count=1 -v -run '^TestSoak$' ./test/soak/ -soak.duration=1m")
	}
	dur := *flagDuration
	warmup := min(30*time.Second, dur/6)
	restartEvery := *flagRestart
	if restartEvery <= 0 {
		restartEvery = max(dur/8, 15*time.Second)
	}
	finalBound := 2*leaseWindow + 30*time.Second
	if dl, ok := t.Deadline(); ok && time.Until(dl) < dur+finalBound+time.Minute {
		t.Fatalf("-timeout is too short for -soak.duration=%s: give at least %s", dur, (dur + finalBound + 2*time.Minute).Round(time.Minute))
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("soak: seed %d (-soak.seed=%d replays the schedule), duration %s, warm-up %s, restarts every %s on average", seed, seed, dur, warmup, restartEvery)

	bin := buildAgent(t)
	stack := deploydtest.NewStack(t, &fakestack.Options{LeaseBudget: leaseBudget, LeaseWindow: leaseWindow, TokenTTL: 10 * time.Minute, NextCheckin: nextCheckin})

	procBox := newBox(t, stack, "env-dev-01")
	inBox := newBox(t, stack, "env-dev-02")
	w := newWorld(stack, []*box{procBox, inBox}, seed)
	w.rotate()
	if err := w.publish(true); err != nil {
		t.Fatal(err)
	}

	var failMu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failMu.Lock()
		failures = append(failures, msg)
		failMu.Unlock()
		t.Error(msg)
	}

	logDir := t.TempDir()
	binAgent := &binaryAgent{bin: bin, box: procBox, interval: *flagInterval, logDir: logDir}
	inLog, err := os.Create(filepath.Join(logDir, "inproc.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inLog.Close() }()
	inAgent := &inprocAgent{box: inBox, interval: *flagInterval, codes: map[int]int{},
		logger: slog.New(slog.NewTextHandler(inLog, &slog.HandlerOptions{Level: slog.LevelInfo}))}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	// agentsCtx outlives the faults: the agents keep running through the final
	// convergence.
	agentsCtx, stopAgents := context.WithCancel(context.Background())
	defer stopAgents()

	var statusOut strings.Builder
	var statusMu sync.Mutex
	addStatus := func(b *box) {
		out, err := b.status(context.Background(), bin)
		statusMu.Lock()
		statusOut.WriteString(out)
		statusMu.Unlock()
		if err != nil {
			fail("status on %s: %v: %s", b.Env, err, out)
		}
	}

	exits := map[string]int{}
	restarts := map[string]int{}
	var exitMu sync.Mutex
	var wg sync.WaitGroup

	// The binary: restarted at exponential intervals until ctx ends, SIGTERM 2 in 3.
	p, err := binAgent.start()
	if err != nil {
		t.Fatal(err)
	}
	restartRng := rand.New(rand.NewPCG(seed, 1))
	wg.Go(func() {
		for {
			wait := time.Duration(restartRng.ExpFloat64() * float64(restartEvery))
			select {
			case <-ctx.Done():
				return
			case <-p.done:
				code := p.state.ExitCode()
				fail("the loop (generation %d) ended by itself with %d", p.gen, code)
				exitMu.Lock()
				exits[fmt.Sprintf("by itself %d", code)]++
				exitMu.Unlock()
			case <-time.After(wait):
				kill := restartRng.IntN(3) == 0
				code, inTime := stop(p, kill, 30*time.Second)
				binAgent.clear()
				name := "SIGTERM"
				if kill {
					name = "SIGKILL"
				}
				exitMu.Lock()
				restarts["binary "+name]++
				exits[fmt.Sprintf("%s → %d", name, code)]++
				exitMu.Unlock()
				if !kill && (!inTime || code != deployd.ExitOK) {
					fail("SIGTERM to the loop (generation %d): exit %d, within 30s: %v; want 0", p.gen, code, inTime)
				}
			}
			addStatus(procBox)
			np, err := binAgent.start()
			if err != nil {
				fail("restart the agent: %v", err)
				return
			}
			p = np
		}
	})

	// The in-process loop, rebuilt at exponential intervals.
	inRng := rand.New(rand.NewPCG(seed, 2))
	var inRngMu sync.Mutex
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		inAgent.run(agentsCtx, func() time.Duration {
			inRngMu.Lock()
			defer inRngMu.Unlock()
			if ctx.Err() != nil {
				return time.Hour // the faults are over: keep this agent to the end
			}
			return time.Duration(inRng.ExpFloat64() * float64(restartEvery))
		}, fail)
	}()

	// The faults.
	faultRng := rand.New(rand.NewPCG(seed, 3))
	wg.Go(func() { w.rain(ctx, faultRng, *flagFaults, fail) })

	// The sampler.
	var rss, fds, threads, gor, gorTotal []sample
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tk := time.NewTicker(*flagSample)
		defer tk.Stop()
		for {
			select {
			case <-agentsCtx.Done():
				return
			case <-tk.C:
			}
			now := time.Since(start)
			if cur := binAgent.current(); cur != nil {
				if st, err := testbox.ReadProc(cur.cmd.Process.Pid); err == nil && time.Since(cur.started) >= warmup {
					rss = append(rss, sample{seg: cur.gen, t: now, v: st.AnonMiB})
					threads = append(threads, sample{seg: cur.gen, t: now, v: float64(st.Threads)})
					fds = append(fds, sample{seg: cur.gen, t: now, v: float64(st.FDs)})
				}
			}
			if now >= warmup {
				total, outside, _ := goroutineCensus()
				gor = append(gor, sample{t: now, v: float64(outside)})
				gorTotal = append(gorTotal, sample{t: now, v: float64(total)})
			}
		}
	}()

	<-ctx.Done()
	t.Logf("soak: faults over after %s; publishing a last bundle, both agents must apply it within %s", time.Since(start).Round(time.Second), finalBound)
	// the fault goroutine clears every fault as it ends; wait for it and the restarter
	// (the in-process loop runs on)
	wg.Wait()
	// the restarter may have left the binary stopped or mid-start: make sure one runs
	if binAgent.current() == nil {
		if p, err = binAgent.start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.publish(true); err != nil {
		t.Fatal(err)
	}
	final := map[string]string{}
	deadline := time.Now().Add(finalBound)
	for _, b := range w.boxes {
		w.mu.Lock()
		want := w.lastGood[b.Env]
		w.mu.Unlock()
		final[b.Env] = "not applied"
		for time.Now().Before(deadline) {
			if applied(stack, b.Env, want) {
				final[b.Env] = "applied"
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if final[b.Env] != "applied" {
			fail("%s did not apply the last bundle within %s after the faults stopped", b.Env, finalBound)
		}
	}

	// Stop both agents: the binary with SIGTERM (exit 0), the loop by its context.
	cur := binAgent.current()
	code, inTime := stop(cur, false, 30*time.Second)
	exits[fmt.Sprintf("SIGTERM → %d", code)]++
	if !inTime || code != deployd.ExitOK {
		fail("the final SIGTERM: exit %d, within 30s: %v; want 0", code, inTime)
	}
	stopAgents()
	<-sampleDone
	<-inDone
	addStatus(procBox)
	addStatus(inBox)
	elapsed := time.Since(start)
	_, _, creators := goroutineCensus()

	// Exit codes.
	logs := readLogs(t, logDir)
	binTicks, binLeased := tickCounts(logs)
	contract := []int{deployd.ExitOK, deployd.ExitFailed, deployd.ExitTemporary, deployd.ExitEnvMismatch}
	for _, m := range []map[int]int{binTicks, inAgent.codes} {
		for code := range m {
			if !slices.Contains(contract, code) {
				fail("a tick exited %d, not in the contract %v", code, contract)
			}
		}
	}
	if len(binTicks) == 0 || len(inAgent.codes) == 0 {
		fail("no ticks counted: binary %v, in process %v", binTicks, inAgent.codes)
	}

	// Leases.
	leases := map[string]int{}
	maxIn := map[string]int{}
	for _, b := range w.boxes {
		ls := stack.Tenancy.Leases(b.Env)
		leases[b.Env] = len(ls)
		for i := range ls {
			n := 0
			for j := i; j < len(ls) && ls[j].Time.Sub(ls[i].Time) < leaseWindow; j++ {
				n++
			}
			maxIn[b.Env] = max(maxIn[b.Env], n)
			w.mu.Lock()
			isGood := w.good[ls[i].SHA]
			w.mu.Unlock()
			if !isGood {
				fail("%s: a lease for sha %s, which was not published as a good bundle", b.Env, ls[i].SHA[:12])
			}
		}
		if maxIn[b.Env] > leaseBudget {
			fail("%s: %d leases within %s, budget %d", b.Env, maxIn[b.Env], leaseWindow, leaseBudget)
		}
	}
	if d := binLeased + inAgent.leased - leases["env-dev-01"] - leases["env-dev-02"]; d > 0 {
		fail("the agents counted %d more leased ticks than the fake granted", d)
	}

	// Canaries.
	canaries := w.canaryList()
	inEnv := scanCanaries(t, canaries, logs, statusOut.String(), stack, w.boxes, fail)
	if inEnv == 0 {
		fail("no release's .env holds a canary: the canary check would be vacuous")
	}

	// Slopes.
	fr := pooledSlope(rss)
	ff := pooledSlope(fds)
	fth := pooledSlope(threads)
	fg := pooledSlope(gor)
	fgt := pooledSlope(gorTotal)
	for _, g := range []struct {
		name         string
		f            fit
		limit, allow float64
	}{
		{"anonymous memory of the binary (MiB, RssAnon)", fr, limitAnonMiBPerHour, allowAnonMiB},
		{"open fds of the binary", ff, limitFDsPerHour, allowFDs},
		{"goroutines of the in-process agent", fg, limitGoroutines, allowGoroutines},
	} {
		if !g.f.gate(g.limit, g.allow) {
			fail("%s grows: %.2f/h ± %.2f over %d samples, a rise of %.1f over %.2fh (limit %.0f/h + 3 SE, or a rise of %.0f)",
				g.name, g.f.slope, g.f.se, g.f.n, g.f.slope*g.f.span, g.f.span, g.limit, g.allow)
		}
	}
	if *flagSamples != "" {
		if err := writeSamples(*flagSamples, map[string][]sample{"anon_mib": rss, "fds": fds, "threads": threads, "goroutines": gor, "goroutines_total": gorTotal}); err != nil {
			t.Error(err)
		}
	}

	reports := map[string]int{}
	for _, b := range w.boxes {
		for _, r := range stack.Tenancy.Reports(b.Env) {
			reports[b.Env+" "+r.Result]++
		}
	}
	w.mu.Lock()
	faults := maps.Clone(w.counts)
	w.mu.Unlock()
	restarts["in-process rebuilds"] = inAgent.gens - 1
	fig := figures{
		Seed: seed, Duration: elapsed.Round(time.Second).String(), Warmup: warmup.String(),
		Samples: len(rss), Anon: figure(fr, limitAnonMiBPerHour, allowAnonMiB), FDs: figure(ff, limitFDsPerHour, allowFDs),
		Threads: figure(fth, 0, 0), Goroutines: figure(fg, limitGoroutines, allowGoroutines), GoroutinesTotal: figure(fgt, 0, 0),
		BinaryTicks: binTicks, InprocTicks: inAgent.codes, BinaryExits: exits, Restarts: restarts,
		Leases: leases, MaxInWindow: maxIn, Budget: fmt.Sprintf("%d per %s", leaseBudget, leaseWindow),
		Reports: reports, Faults: faults, Canaries: len(canaries), CanaryInEnv: inEnv, Final: final,
		GoroutinesAtEnd: creators,
	}
	out, _ := json.MarshalIndent(fig, "", "  ")
	t.Logf("soak figures:\n%s", out)
	if *flagReport != "" {
		if err := os.WriteFile(*flagReport, append(out, '\n'), 0o644); err != nil {
			t.Error(err)
		}
	}
	if len(failures) > 0 {
		t.Logf("soak: %d failure(s); replay with -soak.seed=%d", len(failures), seed)
	}
}

// writeSamples writes every series as CSV lines: series, segment, seconds, value.
func writeSamples(path string, series map[string][]sample) error {
	var b strings.Builder
	b.WriteString("series,segment,seconds,value\n")
	for _, name := range slices.Sorted(maps.Keys(series)) {
		for _, s := range series[name] {
			fmt.Fprintf(&b, "%s,%d,%.3f,%g\n", name, s.seg, s.t.Seconds(), s.v)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// applied reports whether a report of env says sha was applied.
func applied(s *fakestack.Stack, env, sha string) bool {
	return slices.ContainsFunc(s.Tenancy.Reports(env), func(r faketenancy.Report) bool { return r.SHA == sha && r.Result == "applied" })
}

// goroutineCensus counts the test process's goroutines, all of them and those outside
// the fakes' HTTP servers (one per connection the agents hold open to them, which the
// agent's keep-alive and the fakes' held calls make come and go), with the outside
// ones grouped by the function that created them, for the report.
func goroutineCensus() (total, outside int, creators map[string]int) {
	creators = map[string]int{}
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if len(bytes.TrimSpace(g)) == 0 {
			continue
		}
		total++
		if !bytes.Contains(g, []byte("net/http.(*conn).serve")) && !bytes.Contains(g, []byte("net/http.(*Server).Serve")) &&
			!bytes.Contains(g, []byte("net/http.(*connReader).backgroundRead")) {
			outside++
			creator := "main"
			if _, after, ok := bytes.Cut(g, []byte("\ncreated by ")); ok {
				line, _, _ := bytes.Cut(after, []byte("\n"))
				name, _, _ := bytes.Cut(line, []byte(" in goroutine"))
				creator = string(name)
			}
			creators[creator]++
		}
	}
	return total, outside, creators
}

func readLogs(t *testing.T, dir string) string {
	t.Helper()
	var all strings.Builder
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	return all.String()
}

// scanCanaries looks for every canary everywhere it must not be and returns how many
// .env files of releases hold one (where it must be).
func scanCanaries(t *testing.T, canaries []string, logs, status string, s *fakestack.Stack, boxes []*box, fail func(string, ...any)) int {
	t.Helper()
	check := func(where, text string) {
		for _, c := range canaries {
			// the whole value, and its first word alone (a leak cut at a space)
			word, _, _ := strings.Cut(c, " ")
			if strings.Contains(text, c) || strings.Contains(text, word) {
				fail("a secret canary in %s", where)
				return
			}
		}
	}
	check("the agents' logs", logs)
	check("the status output", status)
	for _, b := range boxes {
		for what, v := range map[string]any{"reports": s.Tenancy.Reports(b.Env), "check-ins": s.Tenancy.Checkins(b.Env), "leases": s.Tenancy.Leases(b.Env)} {
			data, _ := json.Marshal(v)
			check(b.Env+" "+what, string(data))
		}
	}
	data, _ := json.Marshal(s.Tenancy.Requests())
	check("tenancy's request log", string(data))
	inEnv := 0
	for _, b := range boxes {
		for _, root := range []string{b.Dir, filepath.Dir(b.Docker.Dir)} {
			// the agents have stopped: every file can be read
			err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() || !d.Type().IsRegular() || filepath.Base(path) == "docker" {
					return nil
				}
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if d.Name() == ".env" {
					for _, c := range canaries {
						if bytes.Contains(data, []byte(c)) {
							inEnv++
							break
						}
					}
					return nil
				}
				check(path, string(data))
				return nil
			})
			if err != nil {
				fail("canary scan of %s: %v", root, err)
			}
		}
	}
	return inEnv
}
