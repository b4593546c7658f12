package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

func TestSplit(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	phases := []phase{{"a", "first"}, {"b", "second"}, {"c", ""}}
	tests := []struct {
		name    string
		marks   []mark
		end     time.Time
		want    []time.Duration
		wantErr string
	}{
		{
			name:  "in order, with other lines between",
			marks: []mark{{"noise", at(1)}, {"first line; more", at(10)}, {"noise", at(12)}, {"second", at(30)}},
			end:   at(35),
			want:  []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 5 * time.Millisecond},
		},
		{
			name:  "first match counts",
			marks: []mark{{"first", at(5)}, {"first", at(6)}, {"second", at(7)}},
			end:   at(7),
			want:  []time.Duration{5 * time.Millisecond, 2 * time.Millisecond, 0},
		},
		{
			name:    "missing line",
			marks:   []mark{{"first", at(5)}},
			end:     at(9),
			wantErr: `no log line "second"`,
		},
		{
			name:    "out of order",
			marks:   []mark{{"second", at(5)}, {"first", at(6)}},
			end:     at(9),
			wantErr: `no log line "second"`,
		},
		{
			name:    "end before the last line",
			marks:   []mark{{"first", at(5)}, {"second", at(8)}},
			end:     at(7),
			wantErr: "phase c ends before it starts",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := split(phases, tt.marks, t0, tt.end)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestIdleTickInProcess runs one in-process idle tick and one floor POST: what
// BenchmarkIdleTickInProcess repeats.
func TestIdleTickInProcess(t *testing.T) {
	x := newBox(t)
	x.Stack.Tenancy.SetDesired(envID, faketenancy.Desired{Action: "none"})
	a := x.agent(t, nil, 0)
	before := x.checkins()
	out, err := a.Tick(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "none", out.Action)
	newPoster(t, x).post()
	assert.Equal(t, 2, x.checkins()-before)
}

// TestApplyPhases runs one apply and its floor, as BenchmarkApply50 does with a
// smaller bundle, so that a reworded log line of the agent fails here and not only
// under -bench.
func TestApplyPhases(t *testing.T) {
	const n = 3
	p := newApplier(t, n)
	f := newApplyFloor(t, n)
	p.publish()
	p.apply()
	for i, ph := range applyPhases {
		if ph.name != "report+prune+save" && ph.name != "stage+promote" {
			assert.Positive(t, p.spent[i], ph.name)
		}
	}
	f.run(p.data, p.sha)
	assert.Positive(t, f.inVerify)
	assert.Positive(t, f.inDocker)
	// A second serial applies too (a new lease each time).
	p.publish()
	p.apply()
	assert.Len(t, p.x.Stack.Tenancy.Leases(envID), 2)
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 100}, 3.5},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.in), func(t *testing.T) {
			assert.InDelta(t, tt.want, median(tt.in), 1e-12)
		})
	}
}
