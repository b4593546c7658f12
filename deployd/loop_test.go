package deployd_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
)

// loopRun drives Agent.Loop with a scripted tick and records every pause instead of
// sleeping. codes are the exit codes of the ticks; after the last one the context ends.
type loopRun struct {
	pauses []time.Duration
	ticks  int
}

func runLoop(t *testing.T, b *box, interval time.Duration, rnd func(int64) int64, codes ...int) (*loopRun, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &loopRun{}
	done := make(chan time.Time)
	close(done)
	code := b.agent.Loop(ctx, deployd.LoopOptions{
		Interval: interval,
		Rand:     rnd,
		Tick: func(context.Context) int {
			c := codes[r.ticks]
			r.ticks++
			if r.ticks == len(codes) {
				cancel()
			}
			return c
		},
		After: func(d time.Duration) <-chan time.Time {
			r.pauses = append(r.pauses, d)
			if ctx.Err() != nil {
				return nil // the loop must see ctx end, not a pause
			}
			return done
		},
	})
	return r, code
}

func low(int64) int64    { return 0 }
func high(n int64) int64 { return n - 1 }

// TestLoopFirstTickIsJittered: the first tick waits a random part of a tenth of the
// interval, never the full interval and never a fixed 0 for every box.
func TestLoopFirstTickIsJittered(t *testing.T) {
	b := newBox(t, boxOptions{})
	r, code := runLoop(t, b, time.Minute, high, 0)
	assert.Equal(t, 0, code)
	require.NotEmpty(t, r.pauses)
	assert.Equal(t, 6*time.Second-1, r.pauses[0], "at most a tenth of the interval")
	r, _ = runLoop(t, b, time.Minute, low, 0)
	assert.Equal(t, time.Duration(0), r.pauses[0])
	r, _ = runLoop(t, b, time.Minute, func(n int64) int64 { return n / 2 }, 0)
	assert.Equal(t, 3*time.Second, r.pauses[0], "the pause comes from Rand")
}

// TestLoopBacksOff: after consecutive 75s the pause doubles from the interval up to 15
// minutes (each ±10%); a success goes back to the interval.
func TestLoopBacksOff(t *testing.T) {
	b := newBox(t, boxOptions{})
	const m = time.Minute
	codes := []int{75, 75, 75, 75, 75, 75, 0, 75, 1}
	r, code := runLoop(t, b, m, low, codes...)
	assert.Equal(t, 0, code, "the loop ends with 0 when its context ends")
	assert.Equal(t, len(codes), r.ticks)
	// The pause before the first tick, then one after each tick; the lowest jitter is -10%.
	want := []time.Duration{0, m, 2 * m, 4 * m, 8 * m, 15 * m, 15 * m, m, m, m}
	for i := range want[1:] {
		want[i+1] -= want[i+1] / 10
	}
	assert.Equal(t, want, r.pauses)

	r, _ = runLoop(t, b, m, high, 75, 75)
	assert.Equal(t, []time.Duration{6*time.Second - 1, m + m/10 - 1, 2*m + 2*m/10 - 1}, r.pauses, "the highest jitter is under +10%")
}

// TestLoopWaitsWhatTenancyAsked: after a tick the pause is State.NextCheckin when set.
func TestLoopWaitsWhatTenancyAsked(t *testing.T) {
	b := newBox(t, boxOptions{})
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), fmt.Appendf(nil, `{"schema":1,"env_id":%q,"next_checkin_ns":%d}`, b.Env, 5*time.Second), 0o600))
	r, _ := runLoop(t, b, time.Minute, low, 0, 75)
	assert.Equal(t, []time.Duration{0, 4500 * time.Millisecond, 54 * time.Second}, r.pauses, "a 75 backs off from the interval, not from tenancy's")
}

// TestLoopStopsOnEnvMismatch: 78 ends the loop at once, with 78.
func TestLoopStopsOnEnvMismatch(t *testing.T) {
	b := newBox(t, boxOptions{})
	r, code := runLoop(t, b, time.Minute, low, 0, 78, 0)
	assert.Equal(t, deployd.ExitEnvMismatch, code)
	assert.Equal(t, 2, r.ticks)
	assert.Contains(t, b.Logs.String(), "AGENT_ENV_MISMATCH is never retried")
}

// TestLoopRunsRealTicks: without a Tick, the loop runs Agent.Tick.
func TestLoopRunsRealTicks(t *testing.T) {
	b := newBox(t, boxOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	after := func(time.Duration) <-chan time.Time {
		if b.TenancyCalls("/v1/agent/checkin") >= 2 {
			cancel()
		}
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	code := b.agent.Loop(ctx, deployd.LoopOptions{Interval: time.Minute, After: after})
	assert.Equal(t, 0, code)
	assert.GreaterOrEqual(t, b.TenancyCalls("/v1/agent/checkin"), 2)
}

// TestLoopHonoursRetryAfter: after a 75 whose tenancy answer carried Retry-After, the
// pause is at least that (capped at 15 minutes, spread only after it); without one the
// back-off applies.
func TestLoopHonoursRetryAfter(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	b := newBox(t, boxOptions{now: func() time.Time { return at }})
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	write := func(ra time.Duration) {
		stamp := func(t time.Time) string { return t.Format(time.RFC3339) }
		require.NoError(t, os.WriteFile(b.Cfg.StatePath(), fmt.Appendf(nil,
			`{"schema":1,"env_id":%q,"condition":{"code":"RATE_LIMITED","exit":75,"since":%q,"code_since":%q,"last":%q,"runs":1,"next_attempt":%q}}`,
			b.Env, stamp(at), stamp(at), stamp(at), stamp(at.Add(ra))), 0o600))
	}
	write(5 * time.Minute)
	r, _ := runLoop(t, b, time.Minute, low, 75)
	assert.Equal(t, []time.Duration{0, 5 * time.Minute}, r.pauses, "Retry-After over the back-off")
	r, _ = runLoop(t, b, time.Minute, high, 75)
	assert.Equal(t, 5*time.Minute+30*time.Second-1, r.pauses[1], "spread after it, up to +10%")
	write(time.Hour)
	r, _ = runLoop(t, b, time.Minute, low, 75)
	assert.Equal(t, 15*time.Minute, r.pauses[1], "capped at MaxBackoff")
	write(time.Second)
	r, _ = runLoop(t, b, time.Minute, low, 75)
	assert.Equal(t, 54*time.Second, r.pauses[1], "a shorter Retry-After does not shorten the back-off")
	write(5 * time.Minute)
	r, _ = runLoop(t, b, time.Minute, low, 0)
	assert.Equal(t, 54*time.Second, r.pauses[1], "only after a temporary failure")
}

// TestTickRemembersRetryAfter: a 503 with Retry-After ends the tick on 75 and the
// state's condition keeps the next attempt for the loop and the next ticks; the next
// tick that succeeds ends it.
func TestTickRemembersRetryAfter(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.rt.set(func(req *http.Request, resp *http.Response) *http.Response {
		if strings.HasSuffix(req.URL.Path, "/v1/agent/checkin") {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"120"}},
				Body: io.NopCloser(strings.NewReader(`{"code":"UNAVAILABLE","message":"maintenance"}`)), Request: req}
		}
		return resp
	})
	before := time.Now()
	b.tickExits(deployd.ExitTemporary)
	c := b.State().Condition
	require.NotNil(t, c)
	assert.WithinRange(t, c.NextAttempt, before.Add(2*time.Minute), time.Now().Add(2*time.Minute), "the next attempt is tenancy's Retry-After from the run's start")
	b.rt.set(nil)
	b.tickExits(deployd.ExitOK)
	assert.Nil(t, b.State().Condition, "a tick that ends 0 ends the condition")
}
