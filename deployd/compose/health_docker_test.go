package compose

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

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
	f := newFixture(t, nil)
	f.client.reader = &downReader{up: 1 << 30, containers: []Container{{ID: "a", Service: "web", State: "running", Health: "starting"}}}
	_, err := f.client.WaitHealthy(t.Context(), WaitOptions{Services: []string{"web"}, Timeout: 300 * time.Millisecond, Poll: 5 * time.Millisecond,
		Progress: 50 * time.Millisecond})
	require.ErrorIs(t, err, ErrHealthTimeout)
	n := strings.Count(f.logs.String(), "waiting for services to become ready")
	assert.GreaterOrEqual(t, n, 1)
	assert.LessOrEqual(t, n, 6, "at most one line per Progress")
}
