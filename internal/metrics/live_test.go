package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/metrics"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

func liveSample() metrics.Snapshot {
	s := sample()
	s.Live = &metrics.Live{
		Known: true, Healthy: false, ObservedAt: time.Date(2026, 11, 30, 9, 30, 1, 500e6, time.UTC),
		Services: []metrics.Service{{Name: "api", Healthy: false, Restarts: 7}, {Name: "web", Healthy: true}},
	}
	return s
}

func TestFormatLive(t *testing.T) {
	tests := []struct {
		name     string
		live     *metrics.Live
		families int
		values   map[string]float64
		services map[string][2]float64 // service → healthy, restarts
	}{
		{name: "nothing live", live: nil, families: 20},
		{
			name: "docker could not be asked", families: 22,
			live:   &metrics.Live{Known: false, ObservedAt: time.Unix(1796031001, 0)},
			values: map[string]float64{"monky_deployd_live_known": 0, "monky_deployd_live_observed_timestamp_seconds": 1796031001},
		},
		{
			name: "one service unhealthy and restarting", families: 25, live: liveSample().Live,
			values:   map[string]float64{"monky_deployd_live_known": 1, "monky_deployd_live_healthy": 0},
			services: map[string][2]float64{"api": {0, 7}, "web": {1, 0}},
		},
		{
			name: "healthy", families: 25,
			live:     &metrics.Live{Known: true, Healthy: true, Services: []metrics.Service{{Name: "db", Healthy: true, Restarts: 1}}},
			values:   map[string]float64{"monky_deployd_live_healthy": 1},
			services: map[string][2]float64{"db": {1, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sample()
			s.Live = tt.live
			data, err := metrics.Format(s)
			require.NoError(t, err)
			families := parse(t, data)
			assert.Len(t, families, tt.families)
			for name, want := range tt.values {
				got, _ := sampleOf(t, families, name)
				assert.InDelta(t, want, got, 1e-9, name)
			}
			got := map[string][2]float64{}
			for _, p := range families["monky_deployd_service_healthy"].samples {
				v := got[p.labels["service"]]
				v[0] = p.value
				got[p.labels["service"]] = v
			}
			for _, p := range families["monky_deployd_service_restarts"].samples {
				v := got[p.labels["service"]]
				v[1] = p.value
				got[p.labels["service"]] = v
			}
			if tt.services == nil {
				assert.Empty(t, got)
			} else {
				assert.Equal(t, tt.services, got)
			}
		})
	}
}

func TestFormatLiveGolden(t *testing.T) {
	data, err := metrics.Format(liveSample())
	require.NoError(t, err)
	golden.Assert(t, "live.prom", data)
}

// TestFormatLiveSkipsUnshowableServices: a service name from docker that cannot be a
// label value is left out; the file is still written, other names are escaped.
func TestFormatLiveSkipsUnshowableServices(t *testing.T) {
	s := sample()
	s.Live = &metrics.Live{Known: true, Services: []metrics.Service{
		{Name: ""}, {Name: strings.Repeat("x", 129)}, {Name: "bad\xff"},
		{Name: "_worker", Healthy: true}, {Name: `we"b`, Restarts: -3},
	}}
	data, err := metrics.Format(s)
	require.NoError(t, err)
	families := parse(t, data)
	got := map[string]float64{}
	for _, p := range families["monky_deployd_service_healthy"].samples {
		got[p.labels["service"]] = p.value
	}
	assert.Equal(t, map[string]float64{"_worker": 1, `we"b`: 0}, got)
	for _, p := range families["monky_deployd_service_restarts"].samples {
		assert.GreaterOrEqual(t, p.value, 0.0)
	}
}

func TestFormatImages(t *testing.T) {
	s := sample()
	s.ImagesRemoved, s.ImagesReclaimedBytes = 2, 123456789
	data, err := metrics.Format(s)
	require.NoError(t, err)
	families := parse(t, data)
	got, _ := sampleOf(t, families, "monky_deployd_images_removed")
	assert.InDelta(t, 2, got, 1e-9)
	got, _ = sampleOf(t, families, "monky_deployd_images_reclaimed_bytes")
	assert.InDelta(t, 123456789, got, 1e-9)
	s.ImagesRemoved = -1
	_, err = metrics.Format(s)
	require.ErrorIs(t, err, metrics.ErrInvalid)
}
