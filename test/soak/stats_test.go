package soak

import (
	"math"
	"slices"
	"testing"
	"time"
)

// sample is one measurement of a series: when it was taken and in which segment (one
// agent process, or the whole run for a series that a restart does not reset).
type sample struct {
	seg int
	t   time.Duration // since the start of the soak
	v   float64
}

// fit is a least-squares slope with its standard error, per hour.
type fit struct {
	n        int     // samples used
	segments int     // segments that contributed
	slope    float64 // units per hour
	se       float64 // standard error of slope, units per hour
	mean     float64 // mean of the samples used
	min, max float64
	span     float64 // hours: the longest time a contributing segment was sampled
}

// pooledSlope is the least-squares slope of v over t within segments: every segment
// keeps its own intercept (a restarted process starts from its own level), and all
// segments share one slope — the growth rate of a process while it lives. A segment
// with fewer than three samples adds nothing. The standard error is the textbook one
// of that regression (residual variance over Σ(t−t̄ₛ)²); samples taken a second apart
// are not independent, so it is a lower bound and the gate adds a margin.
func pooledSlope(samples []sample) fit {
	bySeg := map[int][]sample{}
	var order []int
	for _, s := range samples {
		if _, ok := bySeg[s.seg]; !ok {
			order = append(order, s.seg)
		}
		bySeg[s.seg] = append(bySeg[s.seg], s)
	}
	f := fit{min: math.Inf(1), max: math.Inf(-1)}
	var sxx, sxy, sum float64
	type centred struct{ x, y float64 }
	var all []centred
	for _, seg := range order {
		ss := bySeg[seg]
		if len(ss) < 3 {
			continue
		}
		f.span = math.Max(f.span, (ss[len(ss)-1].t - ss[0].t).Hours())
		var mx, my float64
		for _, s := range ss {
			mx += s.t.Hours()
			my += s.v
		}
		mx /= float64(len(ss))
		my /= float64(len(ss))
		for _, s := range ss {
			x, y := s.t.Hours()-mx, s.v-my
			sxx += x * x
			sxy += x * y
			all = append(all, centred{x, y})
			sum += s.v
			f.min, f.max = math.Min(f.min, s.v), math.Max(f.max, s.v)
		}
		f.segments++
	}
	f.n = len(all)
	if f.n == 0 || sxx == 0 {
		return fit{n: f.n, segments: f.segments, se: math.Inf(1)}
	}
	f.slope = sxy / sxx
	f.mean = sum / float64(f.n)
	dof := f.n - f.segments - 1
	if dof <= 0 {
		f.se = math.Inf(1)
		return f
	}
	var rss float64
	for _, c := range all {
		r := c.y - f.slope*c.x
		rss += r * r
	}
	f.se = math.Sqrt(rss / float64(dof) / sxx)
	return f
}

// gate is the assertion on a fitted slope: the growth is flat when the slope is
// not above limit by more than three standard errors, or when the rise it fits over
// the longest sampled segment (slope × span) is within allowance — the size of a
// step a healthy process makes once (the Go heap growing to its GC target after the
// first apply, one more kept-alive connection) and that no per-hour figure can tell
// from a leak in a run of minutes (a step of h half way through a segment fits a rise
// of 1.5 h). A short run (CI's minute) so catches only gross
// leaks (an fd or goroutine per tick); in a long run slope × span outgrows the
// allowance and the limit per hour binds.
func (f fit) gate(limit, allowance float64) bool {
	return f.n > 0 && (f.slope-3*f.se <= limit || f.slope*f.span <= allowance)
}

func TestPooledSlope(t *testing.T) {
	line := func(seg int, from, to time.Duration, base, perHour float64, wobble float64) []sample {
		var out []sample
		for i, d := 0, from; d < to; i, d = i+1, d+time.Second {
			w := 0.0
			if i%2 == 1 {
				w = wobble
			}
			out = append(out, sample{seg: seg, t: d, v: base + perHour*d.Hours() + w})
		}
		return out
	}
	cat := slices.Concat[[]sample]
	tests := []struct {
		name      string
		samples   []sample
		wantSlope float64
		tol       float64
		wantSegs  int
		gateAt    float64
		allowance float64
		wantGate  bool
	}{
		{"flat", line(0, 0, 10*time.Minute, 30, 0, 0), 0, 1e-9, 1, 1, 0, true},
		{"flat with wobble", line(0, 0, 10*time.Minute, 30, 0, 2), 0, 0.5, 1, 5, 0, true},
		{"a leak of 60 per hour", line(0, 0, 10*time.Minute, 30, 60, 0), 60, 1e-6, 1, 5, 2, false},
		{
			// one step of 2 half way through a minute: the fit says 180/h, a rise of 3
			// (a step of h half way fits a rise of 1.5 h), within an allowance of 3.5
			"a step in a short run is within the allowance",
			cat(line(0, 0, 30*time.Second, 24, 0, 0), line(0, 30*time.Second, time.Minute, 26, 0, 0)),
			0, 200, 1, 8, 3.5, true,
		},
		{
			"the same step is growth when the allowance is smaller",
			cat(line(0, 0, 30*time.Second, 24, 0, 0), line(0, 30*time.Second, time.Minute, 26, 0, 0)),
			0, 200, 1, 8, 1, false,
		},
		{
			// three processes, each flat at its own level: no growth while a process lives,
			// although the level rises from one restart to the next
			"restarts at rising levels are not growth",
			cat(line(0, 0, 5*time.Minute, 10, 0, 1), line(1, 5*time.Minute, 10*time.Minute, 20, 0, 1), line(2, 10*time.Minute, 15*time.Minute, 30, 0, 1)),
			0, 0.5, 3, 5, 0, true,
		},
		{
			"a leak in every process, reset by each restart",
			cat(line(0, 0, 5*time.Minute, 10, 120, 0), line(1, 5*time.Minute, 10*time.Minute, 10, 120, 0)),
			120, 1e-6, 2, 10, 2, false,
		},
		{"segments too short count for nothing", cat(line(0, 0, 2*time.Second, 5, 0, 0), line(1, 2*time.Second, 4*time.Second, 50, 0, 0)), 0, 0, 0, 1, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := pooledSlope(tc.samples)
			if f.segments != tc.wantSegs {
				t.Fatalf("segments = %d, want %d", f.segments, tc.wantSegs)
			}
			if math.Abs(f.slope-tc.wantSlope) > tc.tol {
				t.Fatalf("slope = %.4f/h ± %.4f, want %.4f ± %.4f", f.slope, f.se, tc.wantSlope, tc.tol)
			}
			if got := f.gate(tc.gateAt, tc.allowance); got != tc.wantGate {
				t.Fatalf("gate(%.1f, %.1f) = %v, want %v (slope %.3f ± %.3f, span %.3fh)", tc.gateAt, tc.allowance, got, tc.wantGate, f.slope, f.se, f.span)
			}
		})
	}
}
