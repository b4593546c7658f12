package deployd

import (
	"context"
	"time"

	"github.com/monky/monky-deployd/internal/hold"
)

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
