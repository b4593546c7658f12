package deployd

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/monky/monky-deployd/internal/hold"
)

// MaxBackoff is the longest pause of Loop after consecutive temporary failures.
const MaxBackoff = 15 * time.Minute

// LoopOptions configure Loop. The zero value is usable.
type LoopOptions struct {
	// Interval is the pause between ticks when tenancy names none, and the base of the
	// back-off after a temporary failure. `run --loop` defaults it to one minute; zero
	// or less pauses one second.
	Interval time.Duration
	// Tick runs one tick and returns its exit code. Nil: Agent.Tick mapped with
	// ExitCode. The agent binary passes a tick that also logs the outcome and writes
	// the metrics file.
	Tick func(context.Context) int
	// Rand returns a number in [0, n) for the jitter. Nil: math/rand/v2.
	Rand func(n int64) int64
	// After waits d, as time.After. Nil: time.After. For tests.
	After func(d time.Duration) <-chan time.Time
	// Poll waits between two looks, during a pause, at the wall clock and the hold
	// file (pause, below), as time.After. Nil: time.After of WakePoll. For tests.
	Poll func() <-chan time.Time
}

// Loop runs ticks until ctx ends, for hosts without systemd (`run --loop`), and
// returns the exit code of the loop: 0 when ctx ends (a signal), ExitEnvMismatch at
// once when a tick ends on AGENT_ENV_MISMATCH (never retried).
//
// The first tick starts after a random pause of up to a tenth of Interval, so that a
// fleet of boxes started together does not tick together. Between ticks Loop waits
// the interval tenancy asked for at the last check-in (State.NextCheckin), or
// Interval when it asked for none. After a temporary failure (exit 75) it waits
// Interval, doubled after each further consecutive one up to MaxBackoff, so that 75
// never becomes a busy loop. Every pause between ticks is spread by ±10%. When
// tenancy's answer carried a Retry-After (429, 503), the pause is at least that long
// (capped at MaxBackoff), spread by up to +10% after it, never before: a tenancy that
// recovers from an outage tells a fleet when to come back.
func (a *Agent) Loop(ctx context.Context, opts LoopOptions) int {
	if opts.Tick == nil {
		opts.Tick = func(ctx context.Context) int {
			_, err := a.Tick(ctx)
			return ExitCode(err)
		}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Int64N
	}
	if opts.After == nil {
		opts.After = time.After
	}
	wait := firstDelay(opts.Interval, opts.Rand)
	failures := 0
	for {
		a.log.Debug("next tick", "in", wait.Round(time.Millisecond))
		if a.pause(ctx, wait, opts) {
			a.log.Info("stopping the loop on a signal")
			return ExitOK
		}
		code := opts.Tick(ctx)
		if code == ExitEnvMismatch {
			a.log.Error("stopping the loop: AGENT_ENV_MISMATCH is never retried")
			return code
		}
		st, _ := ReadState(a.cfg) // unreadable: the zero State, the interval
		wait = opts.Interval
		if st.NextCheckin > 0 {
			wait = st.NextCheckin
		}
		if code == ExitTemporary {
			failures++
			wait = backoff(opts.Interval, failures)
		} else {
			failures = 0
		}
		wait = jitter(wait, opts.Rand)
		if c := st.Condition; code == ExitTemporary && c.Waiting(a.now()) {
			wait = max(wait, retryAfter(c.NextAttempt.Sub(a.now()), opts.Rand))
		}
	}
}

// retryAfter is the pause tenancy asked for, capped at MaxBackoff, spread by up to
// +10% after it.
func retryAfter(d time.Duration, rnd func(int64) int64) time.Duration {
	d = min(d, MaxBackoff)
	if spread := int64(d) / 10; spread > 0 {
		d += time.Duration(rnd(spread))
	}
	return d
}

// firstDelay is the pause before the first tick: random in [0, interval/10), 0 for an
// interval under ten nanoseconds.
func firstDelay(interval time.Duration, rnd func(int64) int64) time.Duration {
	spread := int64(interval) / 10
	if spread <= 0 {
		return 0
	}
	return time.Duration(rnd(spread))
}

// backoff doubles base after each consecutive temporary failure after the first, up
// to MaxBackoff.
func backoff(base time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// jitter spreads d by ±10%, so that a fleet of loops does not synchronise; d ≤ 0 is
// one second.
func jitter(d time.Duration, rnd func(int64) int64) time.Duration {
	if d <= 0 {
		return time.Second
	}
	spread := int64(d) / 5
	if spread <= 0 {
		return d
	}
	return d - d/10 + time.Duration(rnd(spread))
}

// WakePoll is how often a pause of Loop looks at the wall clock and the hold file.
const WakePoll = 2 * time.Second

// minHoldWake is the shortest time between the end of a tick and a tick started by a
// change of the hold file, so that toggling a hold cannot make the box check in
// more often than that.
const minHoldWake = 10 * time.Second

// pause waits wait before the next tick of Loop, and reports whether ctx ended.
//
// Go's timers run on the monotonic clock, which stands still while a laptop
// sleeps (Linux CLOCK_MONOTONIC), while the wall clock does not: a pause of a
// minute begun before a night's sleep would end a minute after the wake. So the
// pause also ends when the wall clock passes its end: every WakePoll it compares
// the wall clock (the agent's clock, Options.Now, without its monotonic reading)
// with the end it began with, and a loop that slept through its tick checks in
// within WakePoll of the wake. It ends early, too, when the hold file changes (a
// hold set or cleared, `monky-deployd hold --clear`), at the earliest minHoldWake
// after the tick before: the switch a cleared hold allows starts within seconds.
func (a *Agent) pause(ctx context.Context, wait time.Duration, opts LoopOptions) bool {
	poll := opts.Poll
	if poll == nil {
		poll = func() <-chan time.Time { return time.After(WakePoll) }
	}
	begun := a.now().Round(0)
	due := begun.Add(wait)
	stamp := hold.StampOf(a.cfg.Holds.Dir)
	timer := opts.After(wait)
	for {
		select {
		case <-ctx.Done():
			return true
		case <-timer:
			return false
		case <-poll():
		}
		now := a.now().Round(0)
		if s := hold.StampOf(a.cfg.Holds.Dir); s != stamp {
			stamp = s
			at := begun.Add(minHoldWake)
			if at.Before(now) {
				at = now
			}
			if at.Before(due) {
				due = at
			}
			a.log.Info("the hold file changed (a hold set or cleared); checking in soon", "at", due)
		}
		if !now.Before(due) {
			if now.Sub(due) > 2*WakePoll {
				a.log.Info("the wall clock passed the next tick before the timer did (the machine slept, or the clock was set); checking in now",
					"due", due, "now", now)
			}
			return false
		}
	}
}
