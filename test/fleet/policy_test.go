package fleet

import (
	"container/heap"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/internal/testbox"
)

// vclock is a virtual clock for Agent.Loop (LoopOptions.After): a loop's pause ends
// when the clock reaches it, and the clock moves to the earliest pause only once
// every loop is pausing, so an hour of a fleet's loops takes a fraction of a second
// and the timing is exactly the loop's own (first-tick pause, back-off, jitter).
type vclock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Duration
	seq     int
	waiting timers
	loops   int // loops that have not ended
}

type vtimer struct {
	at  time.Duration
	seq int
	ch  chan time.Time
}

type timers []vtimer

func (h timers) Len() int { return len(h) }
func (h timers) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h timers) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timers) Push(x any)   { *h = append(*h, x.(vtimer)) }
func (h *timers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newVClock(loops int) *vclock {
	c := &vclock{loops: loops}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *vclock) after(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	heap.Push(&c.waiting, vtimer{at: c.now + d, seq: c.seq, ch: ch})
	c.seq++
	c.cond.Broadcast()
	c.mu.Unlock()
	return ch
}

func (c *vclock) time() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// run advances the clock until until: each step waits for every loop to pause, then
// ends the earliest pause.
func (c *vclock) run(until time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.waiting) < c.loops {
			c.cond.Wait()
		}
		if c.waiting[0].at > until {
			c.now = until
			return
		}
		t := heap.Pop(&c.waiting).(vtimer)
		c.now = t.at
		t.ch <- epoch.Add(t.at)
	}
}

// policyCase is one scenario of the loop's policy at production's time scale.
type policyCase struct {
	name   string
	jitter bool
	outage time.Duration
	// spreadStart starts each box at a random moment of the first interval instead of
	// all at once: what a first-tick pause of up to a whole interval would do.
	spreadStart bool
}

// policyFigures is what one scenario measured; times in seconds.
type policyFigures struct {
	Start          spread `json:"start"`
	Peak1stMinute  int    `json:"peak_per_s_first_minute"`
	PeakMinute10   int    `json:"peak_per_s_minute_10"`
	PeakMinute60   int    `json:"peak_per_s_minute_60"`
	OutageAttempts int    `json:"attempts_during_outage"`
	Recovery       spread `json:"recovery"`
	RecoveryPeak   int    `json:"recovery_peak_per_s"`
	SteadyPerSec   float64
}

// simulate runs n loops of real Agents whose tick is a stand-in for the check-in: it
// answers 75 (tenancy down) from 60 min for outage, 0 otherwise, and records when it
// ran. Every box starts at 0: a fleet restarted together, the worst case.
func simulate(t *testing.T, n int, interval time.Duration, pc policyCase, seed uint64) policyFigures {
	t.Helper()
	// A box without fakes or docker: the tick is a stand-in, so nothing is ever asked
	// and state.json stays absent.
	cfg := testbox.New(t, testbox.Options{Env: "env-sim-01", NoStack: true, RealDocker: true, Config: func(c *deployd.Config) {
		c.Tenancy.URL, c.Bao.Addr = "http://127.0.0.1:9", "http://127.0.0.1:9"
	}}).Cfg
	outFrom := 60 * time.Minute
	outTo := outFrom + pc.outage
	end := outTo + deployd.MaxBackoff + 5*time.Minute
	clock := newVClock(n)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		a, err := deployd.New(ctx, cfg, deployd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rnd := rand.New(rand.NewPCG(seed, uint64(i))).Int64N
		if !pc.jitter {
			rnd = func(n int64) int64 { return n / 2 }
		}
		after := clock.after
		if pc.spreadStart {
			offset := time.Duration(rand.New(rand.NewPCG(seed+1, uint64(i))).Int64N(int64(interval)))
			first := true
			after = func(d time.Duration) <-chan time.Time {
				if first {
					first = false
					d += offset
				}
				return clock.after(d)
			}
		}
		wg.Go(func() {
			defer func() { _ = a.Close() }()
			a.Loop(ctx, deployd.LoopOptions{Interval: interval, Rand: rnd, After: after, Tick: func(context.Context) int {
				now := clock.time()
				ticks[i] = append(ticks[i], now)
				if now >= outFrom && now < outTo {
					return deployd.ExitTemporary
				}
				return deployd.ExitOK
			}})
		})
	}
	clock.run(end)
	cancel()
	wg.Wait()

	var f policyFigures
	var all []time.Duration
	var first, back []time.Duration
	attempts := 0
	for _, ts := range ticks {
		all = append(all, ts...)
		if len(ts) > 0 {
			first = append(first, ts[0])
		}
		for _, x := range ts {
			if x >= outFrom && x < outTo {
				attempts++
			}
			if x >= outTo {
				back = append(back, x-outTo)
				break
			}
		}
	}
	slices.Sort(all)
	f.Start = spreadOf(first, n)
	f.Peak1stMinute = peakPerSecond(all, 0, time.Minute)
	f.PeakMinute10 = peakPerSecond(all, 9*time.Minute, 10*time.Minute)
	f.PeakMinute60 = peakPerSecond(all, 59*time.Minute, 60*time.Minute)
	f.SteadyPerSec = math.Round(float64(n)/interval.Seconds()*100) / 100
	f.OutageAttempts = attempts
	f.Recovery = spreadOf(back, n)
	f.RecoveryPeak = peakPerSecond(all, outTo, outTo+deployd.MaxBackoff+2*time.Minute)
	return f
}

// peakPerSecond is the most ticks in one second (whole seconds of the virtual clock)
// in [from, to).
func peakPerSecond(sorted []time.Duration, from, to time.Duration) int {
	counts := map[int64]int{}
	peak := 0
	for _, x := range sorted {
		if x >= from && x < to {
			s := int64(x / time.Second)
			counts[s]++
			peak = max(peak, counts[s])
		}
	}
	return peak
}

// TestFleetPolicy runs the loop's policy for a fleet at production's time scale
// (interval 1m, outages of 10 and 30 minutes, MaxBackoff 15m) on a virtual clock:
// Agent.Loop itself, with a stand-in tick. It asserts what docs/OPERATIONS.md says
// of the defaults: with the jitter no tenth of the fleet checks in within one second
// after an outage, and every box is back within the back-off cap (+10 %); without
// it the fleet comes back as one herd (so the measurement tells the two apart).
func TestFleetPolicy(t *testing.T) {
	n := 100
	if *flagAgents > 0 {
		n = *flagAgents
	}
	interval := time.Minute
	for _, pc := range []policyCase{
		{"jitter, 10 min outage", true, 10 * time.Minute, false},
		{"jitter, 30 min outage", true, 30 * time.Minute, false},
		{"no jitter, 10 min outage", false, 10 * time.Minute, false},
		{"no jitter, 30 min outage", false, 30 * time.Minute, false},
		{"jitter, started over one interval, 10 min outage", true, 10 * time.Minute, true},
	} {
		t.Run(pc.name, func(t *testing.T) {
			f := simulate(t, n, interval, pc, 1)
			t.Logf("%d boxes, interval %s, %s: start %+v; peak/s first minute %d, minute 10 %d, minute 60 %d (steady mean %.2f/s); "+
				"%d attempts during the outage; back after recovery %+v, peak %d/s",
				n, interval, pc.name, f.Start, f.Peak1stMinute, f.PeakMinute10, f.PeakMinute60, f.SteadyPerSec, f.OutageAttempts, f.Recovery, f.RecoveryPeak)
			if f.Recovery.N != n {
				t.Fatalf("%d of %d boxes came back after the outage", f.Recovery.N, n)
			}
			// the wait that straddles the recovery is at most MaxBackoff, +10 % jitter
			if limit := (deployd.MaxBackoff + deployd.MaxBackoff/10).Seconds(); f.Recovery.P100 > limit {
				t.Errorf("the last box came back %.0fs after the recovery, more than the cap %.0fs", f.Recovery.P100, limit)
			}
			// a herd: a tenth of the fleet in one second (six times the steady rate of
			// a one-minute interval)
			if pc.jitter {
				if f.RecoveryPeak > n/10 {
					t.Errorf("jitter: %d check-ins in one second after the recovery, more than a tenth of %d boxes", f.RecoveryPeak, n)
				}
			} else if f.RecoveryPeak < n/2 {
				t.Errorf("no jitter: the peak after the recovery is %d/s of %d boxes; the herd should be visible", f.RecoveryPeak, n)
			}
		})
	}
}
