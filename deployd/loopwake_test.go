package deployd_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	holdfile "github.com/monky/monky-deployd/internal/hold"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// sleepyLoop runs Agent.Loop with a monotonic timer that never fires after the first
// pause (a machine asleep, or a long interval) and polls the test sends; ticks counts
// the ticks. The loop ends after stopAfter ticks.
type sleepyLoop struct {
	t      *testing.T
	polls  chan time.Time
	ticks  atomic.Int32
	looks  atomic.Int32 // the loop's calls of Poll: one per wait for a poll
	exited atomic.Bool
	done   chan int
}

// poll sends a poll and waits until the loop has done with it: it waits for the next
// poll, or it ended.
func (l *sleepyLoop) poll() {
	l.t.Helper()
	n := l.looks.Load()
	select {
	case l.polls <- time.Time{}:
	case <-time.After(10 * time.Second):
		l.t.Fatal("the loop does not wait for a poll")
	}
	testprog.WaitFor(l.t, 10*time.Second, "the loop to take the poll", func() bool { return l.looks.Load() > n || l.exited.Load() })
}

func startSleepyLoop(t *testing.T, b *box, interval time.Duration, stopAfter int32) *sleepyLoop {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	l := &sleepyLoop{t: t, polls: make(chan time.Time), done: make(chan int, 1)}
	first := make(chan time.Time)
	close(first)
	var pauses atomic.Int32
	go func() {
		defer l.exited.Store(true)
		l.done <- b.agent.Loop(ctx, deployd.LoopOptions{
			Interval: interval,
			Rand:     low,
			Tick: func(context.Context) int {
				if l.ticks.Add(1) == stopAfter {
					cancel()
				}
				return 0
			},
			After: func(time.Duration) <-chan time.Time {
				if pauses.Add(1) == 1 {
					return first // the first tick starts at once
				}
				return nil // the monotonic clock stands still
			},
			Poll: func() <-chan time.Time {
				l.looks.Add(1)
				return l.polls
			},
		})
	}()
	testprog.WaitFor(t, 10*time.Second, "the first tick", func() bool { return l.ticks.Load() == 1 })
	return l
}

// TestLoopChecksInAfterAWake: a loop whose pause spans a 2-hour sleep (the monotonic
// timer stands still, the wall clock moves on) ticks at its first poll after the wake,
// within WakePoll (under 5 s); before the wall clock passes the tick's time, polls
// do not tick.
func TestLoopChecksInAfterAWake(t *testing.T) {
	c := deploydtest.NewClock(time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC))
	b := newBox(t, boxOptions{now: c.Now})
	l := startSleepyLoop(t, b, time.Minute, 2)
	l.poll()
	l.poll()
	assert.Equal(t, int32(1), l.ticks.Load(), "awake and within the interval: no tick")
	c.Advance(2 * time.Hour) // the lid was closed for two hours
	l.poll()
	select {
	case code := <-l.done:
		assert.Equal(t, 0, code)
	case <-time.After(10 * time.Second):
		t.Fatal("no tick after the wake")
	}
	assert.Equal(t, int32(2), l.ticks.Load())
	assert.Less(t, deployd.WakePoll, 5*time.Second, "the first poll after a wake is within 5 s")
	assert.Contains(t, b.Logs.String(), "the machine slept")
}

// TestLoopWakesOnHoldClear: clearing a hold ends the loop's pause (an hour long) at
// the first poll at least 10 s after the tick before: the switch starts at once.
func TestLoopWakesOnHoldClear(t *testing.T) {
	t.Parallel()
	c := deploydtest.NewClock(time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC))
	b := newBox(t, boxOptions{now: c.Now})
	require.NoError(t, holdfile.Write(b.Cfg.Holds.Dir, holdfile.Hold{Owner: "alice", UID: os.Getuid(), Reason: "demo", SetAt: c.Now(), Until: c.Now().Add(time.Hour)}))
	l := startSleepyLoop(t, b, time.Hour, 2)
	l.poll()
	assert.Equal(t, int32(1), l.ticks.Load())
	require.NoError(t, holdfile.Clear(b.Cfg.Holds.Dir))
	l.poll() // sees the change, 0 s after the tick: not before 10 s
	assert.Equal(t, int32(1), l.ticks.Load(), "toggling a hold cannot make the box check in more than every 10 s")
	c.Advance(11 * time.Second)
	l.poll()
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		t.Fatal("no tick after the hold was cleared")
	}
	assert.Equal(t, int32(2), l.ticks.Load())
}

// TestLeaseExpiredDuringSleepIsNotUsed: a lease recorded for the sha is used again
// while it lasts, but not once its expiry passed while the machine slept (judged by
// the wall clock): the tick asks for a new lease.
func TestLeaseExpiredDuringSleepIsNotUsed(t *testing.T) {
	t.Parallel()
	for _, slept := range []time.Duration{0, 2 * time.Hour} {
		t.Run(slept.String(), func(t *testing.T) {
			c := deploydtest.NewClock(time.Now().Truncate(time.Second))
			b := newBox(t, boxOptions{now: c.Now, stack: &fakestack.Options{Now: c.Now, TokenTTL: 24 * time.Hour}})
			b.idleTick()
			sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
			expires := c.Now().Add(10 * time.Minute)
			b.editState(func(raw map[string]any) {
				raw["lease"] = map[string]any{"sha": sha, "at": c.Now().Format(time.RFC3339), "expires_at": expires.Format(time.RFC3339)}
			})
			c.Advance(slept)
			b.tickExits(deployd.ExitOK)
			assert.Equal(t, sha, b.Live())
			if slept == 0 {
				assert.Zero(t, b.Leases(), "a lease that lasts is used again")
				return
			}
			assert.Equal(t, 1, b.Leases(), "a lease whose expiry passed during the sleep is not used")
			assert.NotContains(t, b.Logs.String(), "going on under the lease")
		})
	}
}
