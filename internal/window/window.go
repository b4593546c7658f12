// Package window decides whether a time falls in a box's apply windows: the times of
// the week in which the agent may switch the box to a new release (docs/OPERATIONS.md,
// "Holds and windows").
//
// A window opens on each of its days at From, in its time zone, and closes at To: on
// the same day when To is after From, on the next day when it is not (a window across
// midnight, "19:00" to "07:00"; From equal to To is a whole day). Times are wall-clock
// times of the zone, so that a window follows a DST change: "19:00" is 19:00 summer
// or winter. A From or To that does not exist on a day (skipped by a DST change) is
// the time time.Date normalises it to (02:30 on a night that jumps from 02:00 to 03:00
// is 03:30); one that exists twice is its first.
package window

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is one parsed window.
type Window struct {
	// Days are the weekdays on which the window opens.
	Days [7]bool
	// From and To are minutes after midnight.
	From, To int
	// Loc is its time zone.
	Loc *time.Location
}

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// ParseDays reads a set of weekdays: "daily", or a comma list of days ("mon") and
// ranges ("mon-fri", "fri-mon" wraps over the week end), by their first three letters.
func ParseDays(s string) ([7]bool, error) {
	var days [7]bool
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "daily" {
		return [7]bool{true, true, true, true, true, true, true}, nil
	}
	if s == "" {
		return days, errors.New(`want days such as "mon-fri", "sat,sun" or "daily"`)
	}
	for part := range strings.SplitSeq(s, ",") {
		a, b, isRange := strings.Cut(strings.TrimSpace(part), "-")
		from, ok := dayNames[strings.TrimSpace(a)]
		to := from
		if isRange {
			var ok2 bool
			to, ok2 = dayNames[strings.TrimSpace(b)]
			ok = ok && ok2
		}
		if !ok {
			return days, fmt.Errorf(`%q is not a day or a range of days (mon, tue, wed, thu, fri, sat, sun)`, part)
		}
		for d := from; ; d = (d + 1) % 7 {
			days[d] = true
			if d == to {
				break
			}
		}
	}
	return days, nil
}

// ParseClock reads "HH:MM" (24-hour) as minutes after midnight.
func ParseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	digits := func(x string) bool { return len(x) == 2 && x[0] >= '0' && x[0] <= '9' && x[1] >= '0' && x[1] <= '9' }
	if !ok || !digits(h) || !digits(m) || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf(`want a time of day such as "19:00", got %q`, s)
	}
	return hh*60 + mm, nil
}

// Parse builds a Window from its config strings; tz "" is loc.
func Parse(days, from, to, tz string, loc *time.Location) (Window, error) {
	var w Window
	var err error
	if w.Days, err = ParseDays(days); err != nil {
		return w, fmt.Errorf("days: %w", err)
	}
	if w.From, err = ParseClock(from); err != nil {
		return w, fmt.Errorf("from: %w", err)
	}
	if w.To, err = ParseClock(to); err != nil {
		return w, fmt.Errorf("to: %w", err)
	}
	w.Loc = loc
	if tz != "" {
		if w.Loc, err = time.LoadLocation(tz); err != nil {
			return w, fmt.Errorf("tz: %q is not a time zone this box knows (the tzdata package holds them)", tz)
		}
	}
	if w.Loc == nil {
		w.Loc = time.Local
	}
	return w, nil
}

// span is the window's opening on the day of date (in its zone): when it opens and
// when it closes.
func (w Window) span(y int, m time.Month, d int) (open, close time.Time) {
	open = time.Date(y, m, d, w.From/60, w.From%60, 0, 0, w.Loc)
	cd := d
	if w.To <= w.From {
		cd++
	}
	return open, time.Date(y, m, cd, w.To/60, w.To%60, 0, 0, w.Loc)
}

// Open reports whether now falls in w, and when the opening it falls in closes.
func (w Window) Open(now time.Time) (bool, time.Time) {
	local := now.In(w.Loc)
	for back := 1; back >= 0; back-- { // yesterday's opening may reach into today
		y, m, d := local.Date()
		open, close := w.span(y, m, d-back)
		if w.Days[open.Weekday()] && !now.Before(open) && now.Before(close) {
			return true, close
		}
	}
	return false, time.Time{}
}

// Next is w's first opening after now; zero when w has no day.
func (w Window) Next(now time.Time) time.Time {
	local := now.In(w.Loc)
	y, m, d := local.Date()
	for i := 0; i <= 7; i++ {
		open, _ := w.span(y, m, d+i)
		if w.Days[open.Weekday()] && open.After(now) {
			return open
		}
	}
	return time.Time{}
}

// Set is a box's windows; the empty Set is always open (no windows: applies at any
// time).
type Set []Window

// Open reports whether now falls in one of s's windows; an empty s is always open.
// When it does not, next is the first opening of any of them.
func (s Set) Open(now time.Time) (open bool, next time.Time) {
	if len(s) == 0 {
		return true, time.Time{}
	}
	for _, w := range s {
		if ok, _ := w.Open(now); ok {
			return true, time.Time{}
		}
		if n := w.Next(now); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return false, next
}
