package zitimesh

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox"
)

var (
	flagLoop = flag.Duration("mesh.loop", 0,
		"TestLoopOverTheMesh: the steady phase of the loop lasts at least this long (0: until 20 check-ins, about 20s); e.g. -mesh.loop=1h")
	flagToken = flag.Duration("mesh.token", time.Minute,
		"TestLoopOverTheMesh: the controller's API-session (OIDC access-token) lifetime; 1m is the controller's minimum, 30m its default")
)

const (
	// steadyCheckins is the least number of check-ins of the steady phase.
	steadyCheckins = 20
	// stallLimit is the longest the steady loop may go without a check-in.
	stallLimit = 2 * time.Minute
	// hostRebind bounds how long the tenancy host (the SDK in this process) takes to
	// bind the service again once the controller and router are back: the test's side
	// of the mesh, not the agent's.
	hostRebind = 3 * time.Minute
	// resumeSlack is, with the time the service was unusable, how long check-ins may
	// take to resume once it is usable again. The loop's back-off after n consecutive
	// failures is about as long as the failures have lasted, so the pause the loop is
	// in may last about as long again as the outage; beyond it, a tick that was under
	// way (tenancy.timeout, 10s: a dial begun during the outage waits its whole 8s), the
	// SDK's renewal of an expired API session and the first dial of the new mesh, on a
	// loaded machine.
	resumeSlack = 45 * time.Second
	// refreshLead is how long before its end the SDK refreshes an API session
	// (sdk-golang v1.2.10, ziti.go runRefreshes).
	refreshLead = 10 * time.Second
	// rssLeakLimit is the steepest RSS slope a steady phase of ten minutes or more may
	// show, as in test/soak.
	rssLeakLimit = 8.0 // MiB per hour
)

// TestLoopOverTheMesh runs the agent binary as `run --loop --interval 1s` with the sdk
// transport against a real controller and edge router, and measures what issue #18
// asks of the loop on sdk boxes:
//
//   - the controller's authentications of the box, counted on the controller (its
//     apiSession events, controller_test.go): one for the whole steady phase, plus
//     the refreshes of the API session's own lifetime, not one per tick;
//   - the idle tick's duration over the mesh inside the loop (the agent's `tick done`
//     records), median and p95;
//   - the agent's RSS (/proc/<pid>/status VmRSS) over the run, and its slope;
//   - an API session that expires while the controller is down: the controller is
//     stopped just before the SDK would refresh and started again after the session's
//     end; the loop gets a new one and check-ins resume;
//   - a restart of the controller (the quickstart process, with its router): the loop
//     keeps running and check-ins resume within a bound.
//
// The steady phase lasts until 20 check-ins, or -mesh.loop; an hour's run:
//
//	ZITI_BIN=$PWD/tools/ziti/bin/ziti go test -count=1 -v -timeout 2h -run TestLoopOverTheMesh ./test/ziti/ -mesh.loop=1h
//
// (-mesh.token=30m gives the controller's default lifetime; the expiry phase then
// waits for the end of the current session, up to 30 minutes.) With
// `-artifacts -outputdir DIR` the agent's log and the controller's events are kept.
func TestLoopOverTheMesh(t *testing.T) {
	t.Parallel() // with the other loop test: both mostly wait on the mesh
	zitiBin := zitiBinary(t)
	require.GreaterOrEqual(t, *flagToken, time.Minute, "-mesh.token: the controller's minimum is 1m")
	dir := t.TempDir()
	w := newWorld(t, zitiBin, dir)

	// The controller writes its events to a file, and API sessions live -mesh.token.
	eventsPath := filepath.Join(dir, "controller-events.jsonl")
	began := time.Now()
	w.mesh.reconfigure(t, controllerEvents(eventsPath), accessTokenLifetime(*flagToken))
	probe := newProber(t, w, boxID)
	probe.wait(t, 2*time.Minute, "after the controller was reconfigured")
	t.Logf("controller restarted with its event log and %s API sessions in %s", *flagToken, time.Since(began).Round(time.Millisecond))
	boxIdentity := w.mesh.identityID(t, loopBoxID)
	svcID := w.mesh.serviceID(t, tenancyService)
	events := func() []ctrlEvent { return readEvents(t, eventsPath) }

	b := newLoopBox(t, w)
	checkins := func() int { return w.meshHits.count("/v1/agent/checkin") }
	require.Zero(t, checkins())

	// The agent's log and the controller's events are kept with -artifacts.
	artifacts := t.ArtifactDir()
	t.Cleanup(func() { copyFile(t, eventsPath, filepath.Join(artifacts, "controller-events.jsonl")) })
	cfg := b.config(t, "loop.yaml", sdkTenancy(w, w.ids[loopBoxID], tenancyService))
	loop := startLoop(t, b, cfg, filepath.Join(artifacts, "agent.log"))
	loop.waitCheckins(t, checkins, 1, 2*time.Minute, probe, "the first check-in of the loop")
	steadyFrom := time.Now()
	first := checkins()
	rss := sampleRSS(loop.pid, rssPeriod(*flagLoop), loop.done)

	// The steady phase.
	steadyUntil := steadyFrom.Add(*flagLoop)
	for checkins() < first+steadyCheckins || time.Now().Before(steadyUntil) {
		n := checkins()
		loop.waitCheckins(t, checkins, n+1, stallLimit, probe, "the next check-in of the steady loop")
	}
	steadyTo := time.Now()
	steady := steadyFigures(t, loop, rss, steadyFrom, steadyTo, checkins()-first+1)
	steady.sessions = tally(events(), boxIdentity, began)
	steady.circuits = circuits(events(), svcID, loop.started)
	steady.log(t, "steady loop")

	assert.Equal(t, 1, steady.sessions.Created, "one authentication for the whole steady phase: %s", steady.sessions)
	lifetime := steadyTo.Sub(loop.started)
	assert.LessOrEqual(t, steady.sessions.Renewals, int(lifetime/(*flagToken-refreshLead))+1,
		"refreshes of a %s API session over %s: %s", *flagToken, lifetime.Round(time.Second), steady.sessions)
	assert.Zero(t, steady.sessions.AuthFailed, "failed logins: %s", steady.sessions)
	assert.Less(t, steady.sessions.Created+steady.sessions.Renewals, steady.checkins/4,
		"the controller is not called once per tick: %s for %d check-ins", steady.sessions, steady.checkins)
	if *flagLoop >= 10*time.Minute {
		assert.Less(t, steady.rssSlope, rssLeakLimit, "RSS slope in MiB/h over %s", steadyTo.Sub(steadyFrom))
	}

	t.Run("API session expires while the controller is down", func(t *testing.T) {
		expires := expiringSession(t, loop, events, boxIdentity)
		// Stop the controller before the SDK's refresh (ten seconds before the end) and
		// start it again once the session has ended.
		stopAt := expires.Add(-refreshLead - 5*time.Second)
		loop.sleepUntil(t, stopAt)
		stopped := time.Now()
		w.mesh.stop()
		if late := tally(events(), boxIdentity, stopped.Add(-time.Minute)); late.LastIssued.Add(*flagToken).After(expires) {
			// The refresh slipped in before the controller went down.
			expires = late.LastIssued.Add(*flagToken)
		}
		before := checkins()
		loop.sleepUntil(t, expires.Add(3*time.Second))
		w.mesh.launch(t)
		back := time.Now()
		t.Logf("controller down %s, API session ended %s before it came back",
			back.Sub(stopped).Round(time.Millisecond), back.Sub(expires).Round(time.Millisecond))
		resumed := loop.resume(t, probe, checkins, before, stopped, back, "after the expired API session")

		after := tally(events(), boxIdentity, stopped)
		t.Logf("check-ins resumed %s after the controller was back; since the stop: %s; failed ticks: %d (%s)",
			resumed.Sub(back).Round(time.Millisecond), after, loop.failuresBetween(stopped, resumed), loop.firstFailure(stopped))
		require.NotZero(t, after.Created+after.Renewals, "the box has a new API session: %s", after)
		assert.True(t, after.LastIssued.After(expires), "the new API session is issued after the old one ended")
		assert.LessOrEqual(t, after.Created, 1, "at most one new authentication: %s", after)
	})

	t.Run("controller restart", func(t *testing.T) {
		stopped := time.Now()
		w.mesh.stop()
		before := checkins() // nothing gets through from here until the launch
		w.mesh.launch(t)
		back := time.Now()
		away := back.Sub(stopped)
		resumed := loop.resume(t, probe, checkins, before, stopped, back, "after the controller restart")
		after := tally(events(), boxIdentity, stopped)
		t.Logf("controller away %s; check-ins resumed %s after it was back; since the stop: %s; failed ticks: %d (%s)",
			away.Round(time.Millisecond), resumed.Sub(back).Round(time.Millisecond), after,
			loop.failuresBetween(stopped, resumed), loop.firstFailure(stopped))
		assert.LessOrEqual(t, after.Created, 1, "at most one new authentication: %s", after)
	})

	// The end: the same process all along, stopped by SIGTERM with 0.
	select {
	case <-loop.done:
		t.Fatalf("the loop exited: %v; stderr:\n%s", loop.err, loop.tail(40))
	default:
	}
	endRSS := rss.last()
	rss.writeCSV(t, filepath.Join(artifacts, "rss.csv"), loop.started)
	require.NoError(t, loop.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-loop.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the loop did not stop within 30s of SIGTERM; stderr:\n%s", loop.tail(40))
	}
	require.NoError(t, loop.err, "the loop stops with 0 on SIGTERM; stderr:\n%s", loop.tail(40))
	all := loop.all()
	requireSlog(t, all)
	assert.NotRegexp(t, jwtShape, all, "a JWT (an OpenZiti session token?) reached the log")

	total := tally(events(), boxIdentity, began)
	ok, failed := loop.counts()
	t.Logf("whole run: %s over %s, %d check-ins, %d ticks done, %d temporary failures, %d circuits; RSS %.1f MiB at the first check-in, %.1f MiB at the end, peak %.1f MiB",
		total, time.Since(loop.started).Round(time.Second), checkins(), ok, failed, circuits(events(), svcID, loop.started),
		rss.first(), endRSS, rss.peak())
	assert.LessOrEqual(t, total.Created, 3, "one authentication, and at most one more after each outage: %s", total)
	assert.Zero(t, total.AuthFailed, "failed logins: %s", total)
}

// expiringSession returns the end of the box's current API session, at least
// refreshLead+5s+1s away so that the controller can be stopped before the SDK refreshes
// it; when the end is too close it waits for the refresh and returns the new end.
func expiringSession(t *testing.T, loop *loopRun, events func() []ctrlEvent, identity string) time.Time {
	t.Helper()
	deadline := time.Now().Add(*flagToken + time.Minute)
	for {
		last := tally(events(), identity, loop.started).LastIssued
		require.False(t, last.IsZero(), "no API session of the box in the controller's events")
		expires := last.Add(*flagToken)
		if time.Until(expires) > refreshLead+6*time.Second {
			return expires
		}
		require.True(t, time.Now().Before(deadline), "the API session ending at %s was not refreshed", expires)
		loop.sleepUntil(t, time.Now().Add(time.Second))
	}
}

// loopRun is the agent binary running `run --loop`, its stderr parsed as it comes.
type loopRun struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	done    chan struct{} // closed when the process has exited; err is then set
	err     error

	mu    sync.Mutex
	lines []string
	ticks []tickRecord
}

// tickRecord is one `tick done` or temporary-failure record of the agent.
type tickRecord struct {
	at       time.Time
	ok       bool
	duration time.Duration
	line     string
}

var (
	tickDoneRE = regexp.MustCompile(`msg="tick done" .*duration=(\S+) exit=0`)
	tickTempRE = regexp.MustCompile(`msg="tick ended on a temporary condition; the next tick retries" .*duration=(\S+) exit=75`)
)

// startLoop starts `monky-deployd run --loop --interval 1s` with the config at cfg,
// at info level (as in production) unless extraEnv says otherwise. Its stderr is
// also written to logPath.
func startLoop(t *testing.T, b *box, cfg, logPath string, extraEnv ...string) *loopRun {
	t.Helper()
	cmd := b.command(context.Background(), extraEnv, "run", "--loop", "--interval", "1s", "--config", cfg)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	l := &loopRun{cmd: cmd, done: make(chan struct{}), started: time.Now()}
	require.NoError(t, cmd.Start())
	l.pid = cmd.Process.Pid
	go func() {
		defer func() { _ = logf.Close() }()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			l.record(sc.Text())
		}
		l.err = cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		select {
		case <-l.done:
		default:
			_ = cmd.Process.Kill()
			<-l.done
		}
	})
	return l
}

func (l *loopRun) record(line string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	for _, c := range []struct {
		re *regexp.Regexp
		ok bool
	}{{tickDoneRE, true}, {tickTempRE, false}} {
		if m := c.re.FindStringSubmatch(line); m != nil {
			d, _ := time.ParseDuration(m[1])
			l.ticks = append(l.ticks, tickRecord{at: now, ok: c.ok, duration: d, line: line})
		}
	}
}

// all returns the whole stderr so far.
func (l *loopRun) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// tail returns the last n lines of stderr.
func (l *loopRun) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-n):], "\n")
}

// counts returns the number of ticks done and of temporary failures.
func (l *loopRun) counts() (ok, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.ticks {
		if r.ok {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}

// between returns the tick records logged in [from, to).
func (l *loopRun) between(from, to time.Time) []tickRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tickRecord
	for _, r := range l.ticks {
		if !r.at.Before(from) && r.at.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

func (l *loopRun) failuresBetween(from, to time.Time) int {
	n := 0
	for _, r := range l.between(from, to) {
		if !r.ok {
			n++
		}
	}
	return n
}

// firstFailure returns the error of the first failed tick at or after from.
func (l *loopRun) firstFailure(from time.Time) string {
	for _, r := range l.between(from, time.Now().Add(time.Hour)) {
		if !r.ok {
			if _, err, found := strings.Cut(r.line, " err="); found {
				return "first: " + err
			}
			return "first: " + r.line
		}
	}
	return "none"
}

// resume waits, after an outage that began at stopped and whose controller was back
// at back, until the tenancy service is usable again (a probe from this process gets
// through: the tenancy host has bound it again, within hostRebind) and then until the
// loop's check-ins resume, within as long again as the service was unusable plus
// resumeSlack; then for four more check-ins. It logs the figures and the failed ticks
// and returns when check-ins resumed.
func (l *loopRun) resume(t *testing.T, p *prober, count func() int, before int, stopped, back time.Time, what string) time.Time {
	t.Helper()
	if count() <= before {
		p.wait(t, hostRebind, what)
	}
	usable := time.Now()
	l.waitCheckins(t, count, before+1, usable.Sub(stopped)+resumeSlack, p, "check-ins "+what)
	resumed := time.Now()
	l.logFailures(t, stopped, back)
	l.waitCheckins(t, count, before+5, time.Minute, p, "check-ins going on "+what)
	t.Logf("the service was usable again %s after the controller was back (the tenancy host's bind); check-ins resumed %s after the controller was back",
		usable.Sub(back).Round(time.Millisecond), resumed.Sub(back).Round(time.Millisecond))
	return resumed
}

// logFailures logs the failed ticks since from, with their time relative to back.
func (l *loopRun) logFailures(t *testing.T, from, back time.Time) {
	t.Helper()
	for _, r := range l.between(from, time.Now()) {
		if r.ok {
			continue
		}
		_, err, _ := strings.Cut(r.line, " err=")
		t.Logf("  failed tick at %+.1fs from the controller's return, after %s: %s", r.at.Sub(back).Seconds(), r.duration, err)
	}
}

// waitCheckins waits until count() reaches n, for at most d; it fails the test when
// the loop exits or d passes, with the end of the agent's log and what a probe says.
func (l *loopRun) waitCheckins(t *testing.T, count func() int, n int, d time.Duration, p *prober, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for count() < n {
		select {
		case <-l.done:
			t.Fatalf("%s: the loop exited (%v); stderr:\n%s", what, l.err, l.tail(40))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d check-ins, not %d, within %s; %s; stderr:\n%s", what, count(), n, d, p.why(), l.tail(40))
		}
	}
}

// waitTicks waits until the loop has logged ok ticks done and failed temporary
// failures, for at most d; it fails the test when the loop exits or d passes.
func (l *loopRun) waitTicks(t *testing.T, ok, failed int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for n, f := l.counts(); n < ok || f < failed; n, f = l.counts() {
		select {
		case <-l.done:
			t.Fatalf("the loop exited (%v) after %d ticks done, %d failed; stderr:\n%s", l.err, n, f, l.all())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks done and %d failed, not %d and %d, within %s; stderr:\n%s", n, f, ok, failed, d, l.all())
		}
	}
}

// sleepUntil waits until at, failing the test if the loop exits meanwhile.
func (l *loopRun) sleepUntil(t *testing.T, at time.Time) {
	t.Helper()
	select {
	case <-l.done:
		t.Fatalf("the loop exited (%v); stderr:\n%s", l.err, l.tail(40))
	case <-time.After(time.Until(at)):
	}
}

// copyFile copies src to dst, if src exists.
func copyFile(t *testing.T, src, dst string) {
	data, err := os.ReadFile(src)
	if err != nil {
		return
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Logf("keep %s: %v", src, err)
	}
}

// rssSamples is the agent's VmRSS, sampled every period.
type rssSamples struct {
	mu  sync.Mutex
	at  []time.Time
	mib []float64
}

// rssPeriod samples a run of an hour every ten seconds, a shorter one every second.
func rssPeriod(steady time.Duration) time.Duration {
	if steady >= 10*time.Minute {
		return 10 * time.Second
	}
	return time.Second
}

// sampleRSS samples the VmRSS of pid every period until done is closed.
func sampleRSS(pid int, period time.Duration, done <-chan struct{}) *rssSamples {
	s := &rssSamples{}
	s.sample(pid)
	go func() {
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				s.sample(pid)
			}
		}
	}()
	return s
}

func (s *rssSamples) sample(pid int) {
	st, err := testbox.ReadProc(pid)
	if err != nil {
		return // the process has ended
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	s.mib = append(s.mib, st.RSSMiB)
}

// writeCSV writes the samples as "seconds since start,MiB" lines.
func (s *rssSamples) writeCSV(t *testing.T, path string, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("seconds,rss_mib\n")
	for i, at := range s.at {
		fmt.Fprintf(&b, "%.1f,%.2f\n", at.Sub(start).Seconds(), s.mib[i])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Logf("write %s: %v", path, err)
	}
}

func (s *rssSamples) first() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mib) == 0 {
		return math.NaN()
	}
	return s.mib[0]
}

func (s *rssSamples) last() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mib) == 0 {
		return math.NaN()
	}
	return s.mib[len(s.mib)-1]
}

func (s *rssSamples) peak() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Max(append([]float64{math.Inf(-1)}, s.mib...))
}

// window returns the samples in [from, to] and the least-squares slope in MiB per hour.
func (s *rssSamples) window(from, to time.Time) (first, last, slope float64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var xs, ys []float64
	for i, at := range s.at {
		if !at.Before(from) && !at.After(to) {
			xs = append(xs, at.Sub(from).Hours())
			ys = append(ys, s.mib[i])
		}
	}
	if len(ys) == 0 {
		return math.NaN(), math.NaN(), math.NaN(), 0
	}
	return ys[0], ys[len(ys)-1], leastSquares(xs, ys), len(ys)
}

func leastSquares(xs, ys []float64) float64 {
	if len(xs) < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return math.NaN()
	}
	return sxy / sxx
}

// figures of a phase of the loop.
type figures struct {
	span                 time.Duration
	checkins             int
	ticksOK, ticksFailed int
	median, p95, maxTick time.Duration
	rssFirst, rssLast    float64
	rssSlope             float64
	rssSlopeLate         float64 // over the second half: a leak keeps its slope, a warm-up does not
	rssSamples           int
	sessions             sessionTally
	circuits             int
}

// steadyFigures computes the figures of the ticks and RSS samples in [from, to].
func steadyFigures(t *testing.T, l *loopRun, rss *rssSamples, from, to time.Time, checkins int) figures {
	t.Helper()
	f := figures{span: to.Sub(from), checkins: checkins}
	var ds []time.Duration
	for _, r := range l.between(from.Add(-time.Second), to) { // the tick of the first check-in logs just after it
		if r.ok {
			f.ticksOK++
			ds = append(ds, r.duration)
		} else {
			f.ticksFailed++
		}
	}
	require.NotEmpty(t, ds, "no tick done in the steady phase")
	slices.Sort(ds)
	f.median = ds[len(ds)/2]
	f.p95 = ds[min(len(ds)-1, int(math.Ceil(0.95*float64(len(ds))))-1)]
	f.maxTick = ds[len(ds)-1]
	f.rssFirst, f.rssLast, f.rssSlope, f.rssSamples = rss.window(from, to)
	_, _, f.rssSlopeLate, _ = rss.window(from.Add(to.Sub(from)/2), to)
	return f
}

func (f figures) log(t *testing.T, name string) {
	t.Helper()
	t.Logf("%s: %s, %d check-ins through the mesh, %d ticks done, %d temporary failures", name, f.span.Round(time.Second), f.checkins, f.ticksOK, f.ticksFailed)
	t.Logf("%s: tick duration median %s, p95 %s, max %s", name, f.median, f.p95, f.maxTick)
	t.Logf("%s: controller: %s; %d circuits to the service", name, f.sessions, f.circuits)
	slope := "too short a phase for a slope"
	if f.span >= 10*time.Minute {
		slope = fmt.Sprintf("slope %+.2f MiB/h (%+.2f MiB/h over the second half)", f.rssSlope, f.rssSlopeLate)
	}
	t.Logf("%s: RSS %.1f MiB → %.1f MiB over %d samples, %s", name, f.rssFirst, f.rssLast, f.rssSamples, slope)
}
