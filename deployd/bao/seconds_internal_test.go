package bao

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSeconds: OpenBao's TTLs in seconds become Durations within 0 and a century.
func TestSeconds(t *testing.T) {
	for n, want := range map[int64]time.Duration{
		0: 0, -5: 0, 3600: time.Hour, math.MaxInt64: maxTTL, int64(maxTTL/time.Second) + 1: maxTTL,
	} {
		assert.Equal(t, want, seconds(n), n)
	}
}
