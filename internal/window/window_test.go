package window_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/window"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata on this box:", err)
	}
	return loc
}

func TestParseDays(t *testing.T) {
	tests := []struct {
		in   string
		want []time.Weekday
		bad  bool
	}{
		{in: "mon-fri", want: []time.Weekday{1, 2, 3, 4, 5}},
		{in: "sat,sun", want: []time.Weekday{0, 6}},
		{in: "fri-mon", want: []time.Weekday{5, 6, 0, 1}},
		{in: "daily", want: []time.Weekday{0, 1, 2, 3, 4, 5, 6}},
		{in: " Mon , wed ", want: []time.Weekday{1, 3}},
		{in: "mon-mon", want: []time.Weekday{1}},
		{in: "", bad: true},
		{in: "monday", bad: true},
		{in: "mon-", bad: true},
		{in: "mon,,fri", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			days, err := window.ParseDays(tt.in)
			if tt.bad {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			var want [7]bool
			for _, d := range tt.want {
				want[d] = true
			}
			assert.Equal(t, want, days)
		})
	}
}

func TestParseClock(t *testing.T) {
	for in, want := range map[string]int{"00:00": 0, "07:00": 420, "19:30": 1170, "23:59": 1439} {
		got, err := window.ParseClock(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"24:00", "7:00", "19:60", "19", "", "19:00:00", "-1:00", "+1:00"} {
		_, err := window.ParseClock(in)
		assert.Error(t, err, in)
	}
}

func TestParseTZ(t *testing.T) {
	_, err := window.Parse("daily", "19:00", "07:00", "Mars/Olympus", time.UTC)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tz")
	w, err := window.Parse("daily", "19:00", "07:00", "", time.UTC)
	require.NoError(t, err)
	assert.Equal(t, time.UTC, w.Loc, "no tz: the box's zone")
}

// TestOpen: a weekday window across midnight, in Europe/Berlin, including the nights
// of both DST changes of 2026 (29 March, 25 October).
func TestOpen(t *testing.T) {
	loc := berlin(t)
	w, err := window.Parse("mon-fri", "19:00", "07:00", "Europe/Berlin", nil)
	require.NoError(t, err)
	at := func(y int, m time.Month, d, hh, mm int) time.Time { return time.Date(y, m, d, hh, mm, 0, 0, loc) }
	tests := []struct {
		name string
		now  time.Time
		open bool
		next time.Time // when closed
	}{
		{"Monday noon", at(2026, 12, 7, 12, 0), false, at(2026, 12, 7, 19, 0)},
		{"Monday 19:00", at(2026, 12, 7, 19, 0), true, time.Time{}},
		{"Monday 23:59", at(2026, 12, 7, 23, 59), true, time.Time{}},
		{"Tuesday 03:00, across midnight", at(2026, 12, 8, 3, 0), true, time.Time{}},
		{"Tuesday 07:00, closed", at(2026, 12, 8, 7, 0), false, at(2026, 12, 8, 19, 0)},
		{"Saturday 03:00, Friday's window", at(2026, 12, 12, 3, 0), true, time.Time{}},
		{"Saturday 20:00, no window on Saturday", at(2026, 12, 12, 20, 0), false, at(2026, 12, 14, 19, 0)},
		{"Monday 03:00, Sunday opened none", at(2026, 12, 14, 3, 0), false, at(2026, 12, 14, 19, 0)},
		// Spring: Sunday 29 March 2026, 02:00 → 03:00. Friday's window is long over,
		// Monday's opens at 19:00 CEST.
		{"Sunday of the spring change", at(2026, 3, 29, 12, 0), false, at(2026, 3, 30, 19, 0)},
		// Autumn: Sunday 25 October 2026, 03:00 → 02:00. Thursday 22 October's window
		// closes at 07:00 CEST Friday; the one of Friday 23 at 07:00 Saturday.
		{"Friday night before the autumn change", at(2026, 10, 24, 6, 59), true, time.Time{}},
		{"Monday after the autumn change 06:30 CET", at(2026, 10, 26, 6, 30), false, at(2026, 10, 26, 19, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := window.Set{w}
			open, next := set.Open(tt.now)
			assert.Equal(t, tt.open, open)
			if !tt.open {
				assert.True(t, tt.next.Equal(next), "next opening %s, want %s", next, tt.next)
			}
		})
	}
}

// TestOpenAcrossDST: a window of a night of a DST change is as long as the clock on
// the wall says, not 12 hours of elapsed time.
func TestOpenAcrossDST(t *testing.T) {
	loc := berlin(t)
	w, err := window.Parse("sat", "22:00", "06:00", "", loc)
	require.NoError(t, err)
	// Saturday 28 March 2026, 22:00 CET to Sunday 06:00 CEST: 7 hours of real time.
	open := time.Date(2026, 3, 28, 22, 0, 0, 0, loc)
	ok, closes := w.Open(open.Add(time.Minute))
	require.True(t, ok)
	assert.Equal(t, 7*time.Hour, closes.Sub(open))
	ok, _ = w.Open(open.Add(7*time.Hour - time.Second))
	assert.True(t, ok, "05:59:59 CEST is inside")
	ok, _ = w.Open(open.Add(7 * time.Hour))
	assert.False(t, ok, "06:00 CEST is 7h after 22:00 CET, and closed")
	// Saturday 24 October 2026, 22:00 CEST to Sunday 06:00 CET: 9 hours.
	open = time.Date(2026, 10, 24, 22, 0, 0, 0, loc)
	_, closes = w.Open(open.Add(time.Minute))
	assert.Equal(t, 9*time.Hour, closes.Sub(open))
	ok, _ = w.Open(open.Add(8*time.Hour + 30*time.Minute))
	assert.True(t, ok, "05:30 CET is inside: the night is an hour longer")
}

// TestOpenAtASkippedTime: a window that opens at a time a spring change skips opens
// when the clock reaches the next time that exists.
func TestOpenAtASkippedTime(t *testing.T) {
	loc := berlin(t)
	w, err := window.Parse("sun", "02:30", "04:00", "", loc)
	require.NoError(t, err)
	ok, _ := w.Open(time.Date(2026, 3, 29, 3, 45, 0, 0, loc))
	assert.True(t, ok)
	ok, _ = w.Open(time.Date(2026, 3, 29, 1, 59, 0, 0, loc))
	assert.False(t, ok)
}

func TestEmptySetIsAlwaysOpen(t *testing.T) {
	open, next := window.Set{}.Open(time.Now())
	assert.True(t, open)
	assert.True(t, next.IsZero())
}

func TestWholeDay(t *testing.T) {
	w, err := window.Parse("wed", "00:00", "00:00", "", time.UTC)
	require.NoError(t, err)
	ok, closes := w.Open(time.Date(2026, 12, 9, 23, 0, 0, 0, time.UTC))
	assert.True(t, ok)
	assert.Equal(t, time.Date(2026, 12, 10, 0, 0, 0, 0, time.UTC), closes)
}

func FuzzParse(f *testing.F) {
	f.Add("mon-fri", "19:00", "07:00")
	f.Add("sat,sun", "00:00", "00:00")
	f.Add("fri-mon", "23:59", "00:01")
	f.Fuzz(func(t *testing.T, days, from, to string) {
		w, err := window.Parse(days, from, to, "", time.UTC)
		if err != nil {
			return
		}
		now := time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC)
		open, next := window.Set{w}.Open(now)
		if !open {
			require.False(t, next.IsZero(), "a closed window with days opens again within a week")
			require.True(t, next.After(now))
			require.LessOrEqual(t, next.Sub(now), 8*24*time.Hour)
			ok, _ := w.Open(next)
			require.True(t, ok, "it is open at its next opening")
		}
	})
}
