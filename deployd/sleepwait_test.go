package deployd_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestHealthWaitAcrossASleep: a laptop sleeps for two hours in the middle of the
// health wait (docs/OPERATIONS.md, "Sleep and wake"). The agent's wall clock jumps
// while the wait's own clock (monotonic, which a suspend stops) does not: the wait
// counts awake time only. A release that turns healthy after the wake is applied
// under its one lease (no false HEALTH_TIMEOUT, and no lease judged after the login);
// one that never does ends HEALTH_TIMEOUT after health_timeout of awake time, not at
// the wake.
func TestHealthWaitAcrossASleep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		states  []fakedocker.State
		code    codes.Code
		exit    int
		timeout time.Duration
	}{
		{"turns healthy after the wake", []fakedocker.State{{Health: "starting", Times: 40}, {Health: "healthy"}}, "", deployd.ExitOK, 30 * time.Second},
		{"never healthy", []fakedocker.State{{Health: "starting"}}, codes.HealthTimeout, deployd.ExitFailed, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := deploydtest.NewClock(time.Now().Truncate(time.Second))
			b := newBox(t, boxOptions{now: c.Now, stack: &fakestack.Options{Now: c.Now, TokenTTL: 24 * time.Hour},
				config: func(cfg *deployd.Config) { cfg.Compose.HealthTimeout = deployd.Duration(tc.timeout) }})
			b.idleTick()
			sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
			b.scriptRelease(sha, "web", tc.states...)

			// The lid closes as soon as compose up has run: the health wait begins.
			upAt := make(chan time.Time, 1)
			go func() {
				for len(b.DockerCalls("up")) == 0 {
					time.Sleep(5 * time.Millisecond)
				}
				c.Advance(2 * time.Hour)
				upAt <- time.Now()
			}()
			out, code := b.tick()
			ended := time.Now()
			require.Equal(t, tc.exit, code, "%+v\n%s", out, b.Logs.String())
			assert.Equal(t, tc.code, out.Code)
			assert.Equal(t, 1, b.Leases(), "one lease")
			select {
			case at := <-upAt:
				upAt <- at
			default:
				t.Fatal("the tick ended before the clock jumped: the sleep did not fall in the health wait")
			}
			if tc.code == "" {
				assert.Equal(t, sha, b.Live())
				assert.Equal(t, "applied", b.LastReport().Result)
				return
			}
			waited := ended.Sub(<-upAt)
			assert.GreaterOrEqual(t, waited, tc.timeout-100*time.Millisecond,
				"the wait ends after health_timeout of awake time, not at the wake (the wall clock jumped 2 h)")
		})
	}
}
