package compose

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/go-units"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

type states = []fakedocker.State

// webWorker are the states of the fixture's two services: web running with health,
// worker in state.
func webWorker(health, state string) []ServiceState {
	return []ServiceState{{Name: "web", State: "running", Health: health}, {Name: "worker", State: state}}
}

// upStates are the states of the fixture's project once it is up and healthy.
var upStates = webWorker("healthy", "running")

// healthError is the error TestWaitHealthy expects of a wait that fails: of kind, at
// fault services, saying detail ("": detail not checked).
func healthError(kind error, detail string, services ...string) *Error {
	return &Error{Kind: kind, Detail: detail, Services: services}
}

func TestWaitHealthy(t *testing.T) {
	t.Parallel()
	const fast = 5 * time.Millisecond
	for _, tc := range []struct {
		name       string
		format     string
		services   map[string]fakedocker.Service
		commands   map[string]fakedocker.Command
		expect     []string // nil: web and worker
		timeout    time.Duration
		want       *Error // nil: no error; Detail "": not checked
		wantStates []ServiceState
		wantPS     int // ps calls made, 0: not checked
		wantLog    string
	}{
		{
			name:       "healthy after three polls",
			services:   map[string]fakedocker.Service{"web": {States: states{{Health: "starting", Times: 3}, {Health: "healthy"}}}},
			wantStates: upStates,
			wantPS:     4,
			wantLog:    "all services ready",
		},
		{
			name:       "healthy after three polls, compose 2.20 array",
			format:     fakedocker.PSArray,
			services:   map[string]fakedocker.Service{"web": {States: states{{Health: "starting", Times: 3}, {Health: "healthy"}}}},
			wantStates: upStates,
			wantPS:     4,
		},
		{
			name:       "stays starting until the timeout",
			services:   map[string]fakedocker.Service{"web": {States: states{{Health: "starting"}}}},
			timeout:    150 * time.Millisecond,
			want:       healthError(ErrHealthTimeout, "web: running, health starting", "web"),
			wantStates: webWorker("starting", "running"),
			wantLog:    "raise compose.health_timeout",
		},
		{
			name:     "turns unhealthy",
			services: map[string]fakedocker.Service{"web": {States: states{{Health: "starting"}, {Health: "unhealthy"}}}},
			want:     healthError(ErrUnhealthy, "web: unhealthy", "web"),
			wantPS:   2,
			wantLog:  "docker compose -p monky logs --tail 100 web",
		},
		{
			name: "exits non-zero",
			services: map[string]fakedocker.Service{
				"web":    {States: states{{Health: "starting"}, {Health: "healthy"}}},
				"worker": {States: states{{}, {State: "exited", ExitCode: 3}}},
			},
			want:       healthError(ErrUnhealthy, "worker: exited with code 3", "worker"),
			wantStates: webWorker("healthy", "exited"),
		},
		{
			name: "one-shot exit 0 is done",
			services: map[string]fakedocker.Service{
				"migrate": {States: states{{Times: 2}, {State: "exited"}}},
				"web":     {States: states{{Health: "starting", Times: 3}, {Health: "healthy"}}},
			},
			expect:     []string{"migrate", "web", "worker"},
			wantStates: append([]ServiceState{{Name: "migrate", State: "exited"}}, upStates...),
		},
		{
			name:     "restarting state",
			services: map[string]fakedocker.Service{"worker": {States: states{{State: "restarting", ExitCode: 1}}}},
			want:     healthError(ErrUnhealthy, "worker: container is restarting (restart loop)", "worker"),
			wantPS:   1,
		},
		{
			name: "restart loop seen as running with a shrinking uptime",
			services: map[string]fakedocker.Service{
				"web": {States: states{{Health: "starting", Times: 3}, {Health: "healthy"}}},
				"worker": {States: states{
					{Status: "Up 8 seconds"}, {Status: "Up 10 seconds"}, {Status: "Up Less than a second"},
				}},
			},
			want:   healthError(ErrUnhealthy, "worker: container restarted between two polls (restart loop)", "worker"),
			wantPS: 3,
		},
		{
			name: "a crash right after start is caught by the settle poll",
			services: map[string]fakedocker.Service{
				"worker": {States: states{{Status: "Up Less than a second"}, {State: "exited", ExitCode: 1}}},
			},
			want:   healthError(ErrUnhealthy, "worker: exited with code 1", "worker"),
			wantPS: 2,
		},
		{
			name:     "dead container",
			services: map[string]fakedocker.Service{"worker": {States: states{{State: "dead"}}}},
			want:     healthError(ErrUnhealthy, "", "worker"),
		},
		{
			name: "several failures are all named",
			services: map[string]fakedocker.Service{
				"worker": {States: states{{State: "exited", ExitCode: 137}}},
				"web":    {States: states{{Health: "unhealthy"}}},
			},
			expect: []string{"worker", "web"},
			want:   healthError(ErrUnhealthy, "web: unhealthy; worker: exited with code 137", "web", "worker"),
		},
		{
			name:       "a service without a container is not ready",
			expect:     []string{"web", "worker", "cron"},
			timeout:    100 * time.Millisecond,
			want:       healthError(ErrHealthTimeout, "cron: no container", "cron"),
			wantStates: append([]ServiceState{{Name: "cron", State: StateMissing}}, upStates...),
		},
		{
			name:     "a failing ps is retried",
			commands: map[string]fakedocker.Command{"ps": {Stderr: "Error response from daemon: i/o timeout\n", FailTimes: 2}},
			wantPS:   4, // two failures, then worker is seen running twice
			wantLog:  "trying again at the next poll",
		},
		{
			name:     "ps failing until the timeout",
			commands: map[string]fakedocker.Command{"ps": {Exit: 1}},
			timeout:  100 * time.Millisecond,
			want:     healthError(ErrHealthTimeout, "", "web", "worker"),
		},
		{
			name:       "no expected services: every service ps shows",
			expect:     []string{},
			wantStates: upStates,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, &fakedocker.Script{PSFormat: tc.format, Services: tc.services})
			_, err := f.client.Up(t.Context())
			require.NoError(t, err)
			require.NoError(t, f.docker.SetScript(&fakedocker.Script{PSFormat: tc.format, Services: tc.services, Commands: tc.commands}))
			timeout := cmp.Or(tc.timeout, 30*time.Second)
			if tc.expect == nil {
				tc.expect = []string{"web", "worker"}
			}
			start := time.Now()
			got, err := f.client.WaitHealthy(t.Context(), WaitOptions{Services: tc.expect, Timeout: timeout, Poll: fast})
			elapsed := time.Since(start)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want.Kind)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tc.want.Services, e.Services)
				if tc.want.Detail != "" {
					assert.Equal(t, tc.want.Detail, e.Detail)
				}
				if errors.Is(tc.want.Kind, ErrUnhealthy) {
					assert.Equal(t, codes.Unhealthy, e.Code())
					assert.Less(t, elapsed, timeout/2, "unhealthy fails fast, long before the timeout")
				} else {
					assert.Equal(t, codes.HealthTimeout, e.Code())
					assert.GreaterOrEqual(t, elapsed, timeout)
				}
				for _, s := range tc.want.Services {
					assert.Contains(t, err.Error(), s)
				}
			}
			if tc.wantStates != nil {
				assert.Equal(t, tc.wantStates, got)
			}
			if tc.wantPS > 0 {
				assert.Equal(t, tc.wantPS, f.status().Calls["ps"])
			}
			if tc.wantLog != "" {
				assert.Contains(t, f.logs.String(), tc.wantLog)
			}
		})
	}
}

// TestWaitHealthyCancelled: a cancelled ctx ends the wait with ctx's error and the
// states of the last poll. The wait is cancelled by its own log of a poll that found
// web still starting, not by a deadline: on a loaded machine a short deadline passed
// before the first ps answered, and no states were seen.
func TestWaitHealthyCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	polls := 0
	f := newFixture(t, &fakedocker.Script{Services: map[string]fakedocker.Service{"web": {States: states{{Health: "starting"}}}}},
		func(c *Config) {
			c.Logger = slog.New(onMessage{Handler: c.Logger.Handler(), msg: "services not ready yet", fn: func() { polls++; cancel() }})
		})
	_, err := f.client.Up(t.Context())
	require.NoError(t, err)
	got, err := f.client.WaitHealthy(ctx, WaitOptions{Timeout: time.Minute, Poll: 10 * time.Millisecond})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, ctx.Err(), err, "ctx's own error")
	assert.Equal(t, 1, polls, "no poll judges the services after the cancel")
	assert.Equal(t, webWorker("starting", "running"), got, "the last states seen are returned")
}

// onMessage is a slog.Handler that calls fn, in the logging goroutine, for each record
// whose message is msg, before it hands the record on.
type onMessage struct {
	slog.Handler
	msg string
	fn  func()
}

func (h onMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.fn()
	}
	return h.Handler.Handle(ctx, r)
}

func (h onMessage) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(attrs)
	return h
}

func (h onMessage) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

func TestJudge(t *testing.T) {
	was := func(up time.Duration) map[string]sighting {
		return map[string]sighting{"a": {uptime: up, hasUptime: true}}
	}
	for _, tc := range []struct {
		name string
		ctr  Container
		seen map[string]sighting
		want verdict
	}{
		{"running, no healthcheck, first sight", Container{ID: "a", State: "running", Status: "Up 2 seconds"}, nil, notReady},
		{"running, no healthcheck, second sight", Container{ID: "a", State: "running", Status: "Up 4 seconds"}, was(2 * time.Second), ready},
		{"running, no healthcheck, status unreadable", Container{ID: "a", State: "running"}, map[string]sighting{"a": {}}, ready},
		{"healthy at first sight", Container{ID: "a", State: "running", Health: "healthy"}, nil, ready},
		{"starting", Container{ID: "a", State: "running", Health: "starting"}, was(time.Second), notReady},
		{"unhealthy", Container{ID: "a", State: "running", Health: "unhealthy"}, nil, failed},
		{"created", Container{ID: "a", State: "created"}, nil, notReady},
		{"paused", Container{ID: "a", State: "paused"}, nil, notReady},
		{"exited 0", Container{ID: "a", State: "exited"}, nil, ready},
		{"exited 1", Container{ID: "a", State: "exited", ExitCode: 1}, nil, failed},
		{"restarting", Container{ID: "a", State: "restarting"}, nil, failed},
		{"dead", Container{ID: "a", State: "dead"}, nil, failed},
		{"uptime grows", Container{ID: "a", State: "running", Status: "Up About a minute"}, was(50 * time.Second), ready},
		{"uptime grows in words", Container{ID: "a", State: "running", Status: "Up About a minute (healthy)", Health: "healthy"}, was(59 * time.Second), ready},
		{"uptime shrinks", Container{ID: "a", State: "running", Status: "Up 3 seconds"}, was(time.Minute), failed},
		{"uptime shrinks while healthy", Container{ID: "a", State: "running", Status: "Up 3 seconds (healthy)", Health: "healthy"}, was(time.Minute), failed},
		{"another container was seen", Container{ID: "b", State: "running", Status: "Up 3 seconds"}, was(time.Minute), notReady},
	} {
		got, why := judge(tc.ctr, tc.seen)
		assert.Equal(t, tc.want, got, "%s: %s", tc.name, why)
	}
}

// downReader is a docker whose daemon stops answering after up calls of Containers
// and, with back set, answers again after that many more.
type downReader struct {
	mu         sync.Mutex
	calls      int
	up, back   int
	containers []Container
}

func (r *downReader) Containers(context.Context, string) ([]Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls > r.up && (r.back == 0 || r.calls <= r.up+r.back) {
		return nil, fmt.Errorf("docker engine containers: %w: dial unix /run/docker.sock: connect: no such file or directory", ErrDockerUnavailable)
	}
	return r.containers, nil
}

func (r *downReader) Inspect(context.Context, []string) ([]Inspected, error) { return nil, nil }

// TestWaitHealthyDockerGoesAway: a daemon that stops answering during the health
// wait ends it with DOCKER_UNAVAILABLE once DockerGrace has passed, long before the
// health timeout; the failed reads are warned about once, with a count, not at every
// poll.
func TestWaitHealthyDockerGoesAway(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r := &downReader{up: 1, containers: []Container{{ID: "a", Service: "web", State: "running", Health: "starting"}}}
	f.client.reader = r
	start := time.Now()
	_, err := f.client.WaitHealthy(t.Context(), WaitOptions{Services: []string{"web"}, Timeout: time.Minute, Poll: 2 * time.Millisecond,
		DockerGrace: 150 * time.Millisecond, Progress: time.Hour})
	require.ErrorIs(t, err, ErrDockerUnavailable)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, codes.DockerUnavailable, ce.Code())
	assert.Less(t, time.Since(start), 30*time.Second, "ended by the grace, not the health timeout")
	r.mu.Lock()
	polls := r.calls
	r.mu.Unlock()
	assert.Greater(t, polls, 5, "it kept polling through the grace")
	logs := f.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "reading the containers failed during the health wait"), "warned once:\n%s", logs)
	assert.Contains(t, logs, "the docker daemon cannot be reached during the health wait; giving up")
}

// TestWaitHealthyDockerComesBack: a daemon that is away for less than the grace (a
// dockerd restart) does not end the wait.
func TestWaitHealthyDockerComesBack(t *testing.T) {
	f := newFixture(t, nil)
	f.client.reader = &downReader{up: 1, back: 3, containers: []Container{{ID: "a", Service: "web", State: "running", Health: "healthy"}}}
	got, err := f.client.WaitHealthy(t.Context(), WaitOptions{Services: []string{"web"}, Timeout: time.Minute, Poll: 2 * time.Millisecond,
		DockerGrace: time.Minute, Progress: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, []ServiceState{{Name: "web", State: "running", Health: "healthy"}}, got)
}

// TestWaitHealthySaysWhatItWaitsFor: a long wait logs what it still waits for once
// per Progress, at info.
func TestWaitHealthySaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.client.reader = &downReader{up: 1 << 30, containers: []Container{{ID: "a", Service: "web", State: "running", Health: "starting"}}}
	_, err := f.client.WaitHealthy(t.Context(), WaitOptions{Services: []string{"web"}, Timeout: 300 * time.Millisecond, Poll: 5 * time.Millisecond,
		Progress: 50 * time.Millisecond})
	require.ErrorIs(t, err, ErrHealthTimeout)
	n := strings.Count(f.logs.String(), "waiting for services to become ready")
	assert.GreaterOrEqual(t, n, 1)
	assert.LessOrEqual(t, n, 6, "at most one line per Progress")
}

// TestMinUptime: the least uptime each wording of docker allows (hours, days and weeks
// come from rounded hours: half an hour less); for every uptime docker can describe
// (it writes them with go-units' HumanDuration), minUptime of the text is never more
// than the uptime — a container is never taken for older than it is — and not much less.
func TestMinUptime(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]time.Duration{
		"Up Less than a second":            0,
		"Up 1 second":                      time.Second,
		"Up 45 seconds (health: starting)": 45 * time.Second,
		"Up About a minute (healthy)":      time.Minute,
		"Up 12 minutes":                    12 * time.Minute,
		"Up About an hour":                 time.Hour,
		"Up 30 hours (unhealthy)":          29*time.Hour + 30*time.Minute,
		"Up 3 days":                        71*time.Hour + 30*time.Minute,
		"Up 2 weeks (Paused)":              14*24*time.Hour - 30*time.Minute,
		"Up 2 years":                       2 * 365 * 24 * time.Hour,
	} {
		got, ok := minUptime(status)
		assert.True(t, ok, status)
		assert.Equal(t, want, got, status)
	}
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
	for _, s := range []string{"Exited (0) 2 hours ago", "Exited (0) 2 seconds ago", "Up forever", "Restarting (1) 1 second ago", "Created", "Up 99999999999 years", "Up 101 years", ""} {
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
