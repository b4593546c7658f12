package compose_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/compose"
)

// stubReader answers from fixed containers and inspections, and counts calls.
type stubReader struct {
	cs          []compose.Container
	ins         []compose.Inspected
	err         error
	lists, insp int
	project     string
}

func (r *stubReader) Containers(_ context.Context, project string) ([]compose.Container, error) {
	r.lists++
	r.project = project
	return r.cs, r.err
}

func (r *stubReader) Inspect(_ context.Context, ids []string) ([]compose.Inspected, error) {
	r.insp++
	var out []compose.Inspected
	for _, in := range r.ins {
		for _, id := range ids {
			if in.ID == id {
				out = append(out, in)
			}
		}
	}
	return out, nil
}

func ctr(id, service, state, health, status string, exit int) compose.Container {
	return compose.Container{ID: id, Name: "monky-" + service + "-1", Service: service, Project: "monky",
		State: state, Health: health, Status: status, ExitCode: exit}
}

func TestObserve(t *testing.T) {
	tests := []struct {
		name     string
		services []string
		oneShots []string
		cs       []compose.Container
		ins      []compose.Inspected
		healthy  bool
		want     []compose.ObservedService
	}{
		{
			name: "all ready: healthy, no healthcheck, one-shot done", services: []string{"db", "migrate", "web"},
			cs: []compose.Container{
				ctr("a", "web", "running", "healthy", "Up 2 hours (healthy)", 0),
				ctr("b", "db", "running", "", "Up 2 hours", 0),
				ctr("c", "migrate", "exited", "", "Exited (0) 2 hours ago", 0),
			},
			healthy: true,
			want: []compose.ObservedService{
				{Name: "db", State: "running", Ready: true},
				{Name: "migrate", State: "exited", Ready: true},
				{Name: "web", State: "running", Health: "healthy", Ready: true},
			},
		},
		{
			name: "a container died after the apply", services: []string{"web"},
			cs:   []compose.Container{ctr("a", "web", "exited", "", "Exited (137) 5 seconds ago", 137)},
			want: []compose.ObservedService{{Name: "web", State: "exited", ExitCode: 137}},
		},
		{
			name: "restart loop, with restarts counted", services: []string{"api"},
			cs:   []compose.Container{ctr("a", "api", "restarting", "", "Restarting (4) 1 second ago", 4)},
			ins:  []compose.Inspected{{ID: "a", Service: "api", RestartCount: 9}},
			want: []compose.ObservedService{{Name: "api", State: "restarting", Restarts: 9}},
		},
		{
			name: "unhealthy, and a service whose container is gone", services: []string{"db", "web"},
			cs: []compose.Container{ctr("a", "web", "running", "unhealthy", "Up 1 hour (unhealthy)", 0)},
			want: []compose.ObservedService{
				{Name: "db", State: compose.StateMissing},
				{Name: "web", State: "running", Health: "unhealthy"},
			},
		},
		{
			name: "starting is not ready; the worst container speaks for the service", services: []string{"web"},
			cs: []compose.Container{
				ctr("a", "web", "running", "healthy", "Up 1 hour (healthy)", 0),
				ctr("b", "web", "running", "starting", "Up 2 seconds (health: starting)", 0),
			},
			ins:  []compose.Inspected{{ID: "a", Service: "web", RestartCount: 1}, {ID: "b", Service: "web", RestartCount: 2}},
			want: []compose.ObservedService{{Name: "web", State: "running", Health: "starting", Restarts: 3}},
		},
		{
			name: "a stopped service is not a one-shot that is done", services: []string{"migrate", "web"}, oneShots: []string{"migrate"},
			cs: []compose.Container{
				ctr("a", "web", "exited", "", "Exited (0) 1 minute ago", 0),
				ctr("b", "migrate", "exited", "", "Exited (0) 2 hours ago", 0),
			},
			want: []compose.ObservedService{
				{Name: "migrate", State: "exited", Ready: true},
				{Name: "web", State: "exited"},
			},
		},
		{
			name: "a one-off container of docker compose run says nothing of its service", services: []string{"web"},
			cs: []compose.Container{
				ctr("a", "web", "running", "healthy", "Up 1 hour (healthy)", 0),
				{ID: "z", Service: "web", State: "exited", ExitCode: 1, Status: "Exited (1) 1 hour ago", Labels: map[string]string{compose.OneOffLabel: "True"}},
			},
			healthy: true,
			want:    []compose.ObservedService{{Name: "web", State: "running", Health: "healthy", Ready: true}},
		},
		{
			name: "nothing runs and nothing is expected: not healthy",
		},
		{
			name: "a negative restart count from the daemon counts as none", services: []string{"web"},
			cs:      []compose.Container{ctr("a", "web", "running", "", "Up 1 hour", 0)},
			ins:     []compose.Inspected{{ID: "a", Service: "web", RestartCount: -5}},
			healthy: true,
			want:    []compose.ObservedService{{Name: "web", State: "running", Ready: true}},
		},
		{
			name:    "no expected services: every service with a container",
			cs:      []compose.Container{ctr("a", "web", "running", "", "Up 1 hour", 0)},
			healthy: true,
			want:    []compose.ObservedService{{Name: "web", State: "running", Ready: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &stubReader{cs: tt.cs, ins: tt.ins}
			c, err := compose.New(compose.Config{Project: "monky", Dir: t.TempDir(), Reader: r})
			require.NoError(t, err)
			obs, err := c.Observe(context.Background(), tt.services, tt.oneShots)
			require.NoError(t, err)
			assert.Equal(t, tt.healthy, obs.Healthy)
			for i, sv := range obs.Services {
				assert.Equal(t, containerIDsOf(tt.cs, sv.Name), sv.Containers, sv.Name)
				if len(sv.Containers) > 0 {
					assert.Equal(t, obs.At, sv.InspectedAt, sv.Name)
				} else {
					assert.True(t, sv.InspectedAt.IsZero(), "%s: no container, nothing inspected", sv.Name)
				}
				obs.Services[i].Containers, obs.Services[i].InspectedAt = nil, time.Time{} // compared above
			}
			assert.Equal(t, tt.want, obs.Services)
			assert.False(t, obs.At.IsZero())
			assert.Equal(t, 1, r.lists)
			assert.Equal(t, "monky", r.project)
		})
	}
}

func TestObserveReadFailure(t *testing.T) {
	boom := errors.New("engine not answering")
	c, err := compose.New(compose.Config{Project: "monky", Dir: t.TempDir(), Reader: &stubReader{err: boom}})
	require.NoError(t, err)
	_, err = c.Observe(context.Background(), []string{"web"}, nil)
	require.ErrorIs(t, err, boom)
}

// The health wait and the evidence read through the Reader: no docker program is
// needed (the Docker path names nothing).
func TestWaitHealthyAndEvidenceReadThroughTheReader(t *testing.T) {
	r := &stubReader{
		cs:  []compose.Container{ctr("a", "web", "running", "unhealthy", "Up 9 seconds (unhealthy)", 0)},
		ins: []compose.Inspected{{ID: "a", Name: "monky-web-1", Service: "web", State: "running", Health: "unhealthy"}},
	}
	c, err := compose.New(compose.Config{Docker: "/nonexistent/docker", Project: "monky", Dir: t.TempDir(), Reader: r})
	require.NoError(t, err)
	_, err = c.WaitHealthy(context.Background(), compose.WaitOptions{Services: []string{"web"}})
	require.ErrorIs(t, err, compose.ErrUnhealthy)
	assert.Equal(t, 1, r.lists)
	ev := c.HealthEvidence(context.Background(), []string{"web"})
	assert.Contains(t, ev, "--- health of web (container monky-web-1): running, health unhealthy")
	assert.Equal(t, 2, r.lists)
	assert.Equal(t, 1, r.insp)
}

// stepReader shows one list of containers per poll; the last one repeats.
type stepReader struct {
	steps [][]compose.Container
	n     int
}

func (r *stepReader) Containers(context.Context, string) ([]compose.Container, error) {
	cs := r.steps[min(r.n, len(r.steps)-1)]
	r.n++
	return cs, nil
}

func (r *stepReader) Inspect(context.Context, []string) ([]compose.Inspected, error) {
	return nil, nil
}

// TestWaitHealthySettles: through a fast reader, polls come milliseconds apart; a
// container without a healthcheck counts as ready only once it has run for a second,
// so that a one-shot that fails a moment after it starts does not pass for a service.
func TestWaitHealthySettles(t *testing.T) {
	t.Parallel()
	young := ctr("a", "job", "running", "", "Up Less than a second", 0)
	t.Run("a one-shot that fails after 100ms fails the wait", func(t *testing.T) {
		steps := make([][]compose.Container, 10) // 10 polls of 10ms: running
		for i := range steps {
			steps[i] = []compose.Container{young}
		}
		steps = append(steps, []compose.Container{ctr("a", "job", "exited", "", "Exited (3) Less than a second ago", 3)})
		c, err := compose.New(compose.Config{Project: "monky", Dir: t.TempDir(), Reader: &stepReader{steps: steps}})
		require.NoError(t, err)
		_, err = c.WaitHealthy(context.Background(), compose.WaitOptions{Services: []string{"job"}, Poll: 10 * time.Millisecond})
		require.ErrorIs(t, err, compose.ErrUnhealthy)
		assert.Contains(t, err.Error(), "exited with code 3")
	})
	// A service that keeps running is ready after the settle time; docker's own uptime
	// of a second is enough.
	for _, tc := range []struct {
		status   string
		min, max time.Duration
	}{{"Up Less than a second", time.Second, time.Minute}, {"Up 3 seconds", 0, 500 * time.Millisecond}} {
		t.Run(tc.status, func(t *testing.T) {
			c, err := compose.New(compose.Config{Project: "monky", Dir: t.TempDir(),
				Reader: &stepReader{steps: [][]compose.Container{{ctr("a", "job", "running", "", tc.status, 0)}}}})
			require.NoError(t, err)
			start := time.Now()
			_, err = c.WaitHealthy(context.Background(), compose.WaitOptions{Services: []string{"job"}, Poll: 10 * time.Millisecond})
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(start), tc.min)
			assert.Less(t, time.Since(start), tc.max)
		})
	}
}

// containerIDsOf are the sorted IDs of service's containers in cs, one-off containers
// left out.
func containerIDsOf(cs []compose.Container, service string) []string {
	var ids []string
	for _, c := range cs {
		if c.Service == service && c.Labels[compose.OneOffLabel] != "True" {
			ids = append(ids, c.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestObserveAfter: a service whose containers are those of the previous observation
// and have run since before it keeps its restart count without an inspection; any
// other service is inspected.
func TestObserveAfter(t *testing.T) {
	prevAt := time.Now().Add(-time.Minute)
	prev := compose.Observation{At: prevAt, Services: []compose.ObservedService{
		{Name: "web", State: "running", Restarts: 4, Containers: []string{"a"}, InspectedAt: prevAt.Add(-5 * time.Minute)},
	}}
	with := func(edit func(p *compose.Observation)) compose.Observation {
		p := prev
		p.Services = slices.Clone(prev.Services)
		edit(&p)
		return p
	}
	web := func(id, state, status string) []compose.Container {
		return []compose.Container{ctr(id, "web", state, "", status, 0)}
	}
	tests := []struct {
		name      string
		prev      compose.Observation
		cs        []compose.Container
		inspected bool
		restarts  int
	}{
		{"up for hours, same container: prev's count", prev, web("a", "running", "Up 3 hours"), false, 4},
		{"up 2 minutes, observed a minute ago: prev's count", prev, web("a", "running", "Up 2 minutes"), false, 4},
		{"up about a minute, observed a minute ago: it may have restarted since", prev, web("a", "running", "Up About a minute"), true, 7},
		{"up 30 seconds: restarted since", prev, web("a", "running", "Up 30 seconds"), true, 7},
		{"another container: recreated", prev, web("b", "running", "Up 3 hours"), true, 1},
		{"a second container", prev, append(web("a", "running", "Up 3 hours"), ctr("b", "web", "running", "", "Up 3 hours", 0)), true, 7 + 1},
		{"restarting", prev, web("a", "restarting", "Restarting (1) 1 second ago"), true, 7},
		{"paused", prev, web("a", "paused", "Up 3 hours (Paused)"), true, 7},
		{"a status that is no uptime", prev, web("a", "running", "Up forever"), true, 7},
		{"no previous observation", compose.Observation{}, web("a", "running", "Up 3 hours"), true, 7},
		{"a previous observation that recorded no containers",
			with(func(p *compose.Observation) { p.Services[0].Containers = nil }), web("a", "running", "Up 3 hours"), true, 7},
		{"a count not inspected for an hour: read again",
			with(func(p *compose.Observation) { p.Services[0].InspectedAt = prevAt.Add(-time.Hour) }), web("a", "running", "Up 3 hours"), true, 7},
		{"a count never inspected",
			with(func(p *compose.Observation) { p.Services[0].InspectedAt = time.Time{} }), web("a", "running", "Up 3 hours"), true, 7},
		{"a previous observation after now: the clock went back",
			with(func(p *compose.Observation) { p.At = time.Now().Add(10 * time.Minute) }), web("a", "running", "Up 2 minutes"), true, 7},
		{"two containers, both unchanged: prev's count",
			with(func(p *compose.Observation) { p.Services[0].Containers = []string{"a", "b"} }),
			append(web("a", "running", "Up 3 hours"), ctr("b", "web", "running", "", "Up 2 days", 0)), false, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &stubReader{cs: tt.cs, ins: []compose.Inspected{
				{ID: "a", Service: "web", RestartCount: 7}, {ID: "b", Service: "web", RestartCount: 1}}}
			c, err := compose.New(compose.Config{Project: "monky", Dir: t.TempDir(), Reader: r})
			require.NoError(t, err)
			obs, err := c.ObserveAfter(context.Background(), tt.prev, []string{"web"}, nil)
			require.NoError(t, err)
			require.Len(t, obs.Services, 1)
			assert.Equal(t, tt.inspected, r.insp > 0, "inspected")
			assert.Equal(t, tt.restarts, obs.Services[0].Restarts)
			assert.Equal(t, containerIDsOf(tt.cs, "web"), obs.Services[0].Containers)
			if tt.inspected {
				assert.Equal(t, obs.At, obs.Services[0].InspectedAt, "inspected now")
			} else {
				assert.Equal(t, tt.prev.Services[0].InspectedAt, obs.Services[0].InspectedAt, "carried with the count")
			}
		})
	}
}
