package deployd

import (
	"context"
	"math/rand/v2"
	"time"
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
	// file (loopwake.go), as time.After. Nil: time.After of WakePoll. For tests.
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
