package bao_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd/bao"
)

// TestLookupDue: the next lookup is when NeedsRenew turns true, never later than a day
// and never before now; and NeedsRenew agrees with it on both sides.
func TestLookupDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		info bao.TokenInfo
		want time.Duration // from now
	}{
		{"renewable, 60m of 60m", bao.TokenInfo{Renewable: true, TTL: time.Hour, CreationTTL: time.Hour}, 40 * time.Minute},
		{"renewable, 25m of 60m", bao.TokenInfo{Renewable: true, TTL: 25 * time.Minute, CreationTTL: time.Hour}, 5 * time.Minute},
		{"renewable, 19m of 60m: due", bao.TokenInfo{Renewable: true, TTL: 19 * time.Minute, CreationTTL: time.Hour}, 0},
		{"renewable, 30 days: a day", bao.TokenInfo{Renewable: true, TTL: 720 * time.Hour, CreationTTL: 720 * time.Hour}, 24 * time.Hour},
		{"renewable by expiry only", bao.TokenInfo{Renewable: true, ExpireTime: now.Add(time.Hour), CreationTTL: time.Hour}, 40 * time.Minute},
		{"not renewable, 2h left", bao.TokenInfo{TTL: 2 * time.Hour}, 2 * time.Hour},
		{"not renewable, expired", bao.TokenInfo{ExpireTime: now.Add(-time.Minute)}, 0},
		{"no TTL, no expiry", bao.TokenInfo{}, 24 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			due := c.info.LookupDue(now)
			assert.Equal(t, now.Add(c.want), due)
			if c.info.Renewable && c.info.TTL > 0 && c.want > 0 && c.want < 24*time.Hour {
				assert.False(t, c.info.NeedsRenew(now), "not due before LookupDue")
				later := c.info
				later.TTL -= c.want + time.Second
				assert.True(t, later.NeedsRenew(now.Add(c.want+time.Second)), "due after LookupDue")
			}
		})
	}
}

// TestLookupDueHugeTTL: a TTL no server sends (as a lookup would decode it, bounded to
// a century) gives a lookup within a day, not an overflow into the past or far future.
func TestLookupDueHugeTTL(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	huge := 100 * 365 * 24 * time.Hour
	for _, info := range []bao.TokenInfo{
		{Renewable: true, TTL: huge, CreationTTL: huge},
		{TTL: huge},
	} {
		assert.Equal(t, now.Add(24*time.Hour), info.LookupDue(now))
	}
}
