package compose

import (
	"testing"
	"time"

	"github.com/docker/go-units"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMinUptimeBoundsDocker: for every uptime docker can describe (it writes them with
// go-units' HumanDuration), minUptime of the text is never more than the uptime — a
// container is never taken for older than it is — and not much less.
func TestMinUptimeBoundsDocker(t *testing.T) {
	sweep := []struct{ to, step time.Duration }{
		{2 * time.Minute, 100 * time.Millisecond},
		{3 * time.Hour, 7 * time.Second},
		{60 * 24 * time.Hour, 13 * time.Minute},
		{4 * 365 * 24 * time.Hour, 5 * time.Hour},
	}
	var d time.Duration
	n := 0
	for _, s := range sweep {
		for ; d < s.to; d += s.step {
			status := "Up " + units.HumanDuration(d)
			up, ok := minUptime(status + " (healthy)")
			require.True(t, ok, status)
			require.LessOrEqual(t, up, d, "%s: %v is more than the uptime %v", status, up, d)
			require.GreaterOrEqual(t, up, d/2-time.Second, "%s: %v is far below the uptime %v", status, up, d)
			n++
		}
	}
	assert.Greater(t, n, 10000)
	for _, s := range []string{"Exited (0) 2 hours ago", "Up forever", "Restarting (1) 1 second ago", "Created", "Up 99999999999 years", "Up 101 years", ""} {
		_, ok := minUptime(s)
		assert.False(t, ok, s)
	}
}

// FuzzMinUptime: any status text gives either no uptime or one between zero and a
// thousand years; a text docker writes gives no more than the uptime it was written
// from.
func FuzzMinUptime(f *testing.F) {
	for _, s := range []string{"Up 2 hours (healthy)", "Up Less than a second", "Up 1 second", "Up About an hour",
		"Up 3 weeks (Paused)", "Exited (0) 2 hours ago", "Up 9999999999999999999 years", "Up -3 days", ""} {
		f.Add(s, int64(0))
	}
	f.Add("", int64(90*time.Minute))
	f.Fuzz(func(t *testing.T, status string, d int64) {
		if up, ok := minUptime(status); ok {
			require.GreaterOrEqual(t, up, time.Duration(0))
			require.LessOrEqual(t, up, maxUptime)
		}
		if d >= 0 && d < int64(100*365*24*time.Hour) {
			up, ok := minUptime("Up " + units.HumanDuration(time.Duration(d)))
			require.True(t, ok)
			require.LessOrEqual(t, up, time.Duration(d))
		}
	})
}
