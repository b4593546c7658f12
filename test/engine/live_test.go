package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// sigkilled is the exit code of a container whose process died of SIGKILL (128+9):
// what `docker kill` leaves.
const sigkilled = 137

// liveTurnsUnhealthy: a release that came up healthy loses a container between two
// ticks. The check-in's live object says so (the dead service exited, with its code),
// and the tick only tells: no lease, no report, no compose command, the live release
// and the other containers untouched.
//
// The worker has no restart policy, so that what the second tick reads is
// deterministic: exited with 137, restarts 0, for as long as the test looks. With
// `restart: always` docker would start it again at once and the tick would see it
// running, restarting or (health-less) running again as a race decides.
func liveTurnsUnhealthy(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	sha := b.publish(release{compose: "services:\n" + webService + workerService, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	applyAt := time.Now()
	require.Equal(t, 0, b.tick())
	require.Equal(t, "applied", b.LastReport().Result)
	require.NotEmpty(t, b.dockerActivity(applyAt), "the probe of docker activity sees an apply")

	b.Stack.Tenancy.SetDesired(b.Env, faketenancy.Desired{Action: "none"})
	require.Equal(t, 0, b.tick())
	live, ok := b.Stack.Tenancy.LastLive(b.Env)
	require.True(t, ok, "the check-in carries a live object")
	require.NotNil(t, live.Healthy, "docker answered: %+v", live)
	assert.True(t, *live.Healthy)
	assert.Empty(t, live.Reason)
	assert.Equal(t, []faketenancy.LiveService{
		{Name: "web", State: "running", Health: "healthy"},
		{Name: "worker", State: "running"},
	}, live.Services)
	firstAt := live.ObservedAt

	web := b.containerIDs()["web"]
	killAt := time.Now()
	b.killService(sha, "worker")
	if be.engine {
		require.Contains(t, b.dockerActivity(killAt), "die worker", "the probe of docker activity sees the kill")
	}
	before, leases, reports := b.runID(), b.Leases(), len(b.Stack.Tenancy.Reports(b.Env))
	mark := time.Now()
	require.Equal(t, 0, b.tick(), "an unhealthy live release is told, not a failure of the tick")

	live, ok = b.Stack.Tenancy.LastLive(b.Env)
	require.True(t, ok)
	require.NotNil(t, live.Healthy, "docker answered: %+v", live)
	assert.False(t, *live.Healthy)
	assert.True(t, live.ObservedAt.After(firstAt), "observed again: %s, before %s", live.ObservedAt, firstAt)
	assert.Equal(t, []faketenancy.LiveService{
		{Name: "web", State: "running", Health: "healthy"},
		{Name: "worker", State: "exited", ExitCode: sigkilled},
	}, live.Services)

	assert.Equal(t, leases, b.Leases(), "no new lease")
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "no new report")
	assert.Empty(t, b.dockerActivity(mark), "no compose command, no container started, stopped or removed")
	assert.Equal(t, sha, b.Live(), "current still points to the release")
	assert.Equal(t, before, b.runID(), "the containers keep their IDs")
	if be.engine {
		assert.Equal(t, web, b.containerIDs()["web"], "web kept its container")
		assert.Equal(t, map[string]string{"web": "running", "worker": "exited"}, b.containers())
	}
	st := b.State()
	assert.Equal(t, sha, st.LiveSHA)
	require.NotNil(t, st.Live, "state.json has live")
	assert.Equal(t, sha, st.Live.SHA)
	assert.False(t, st.Live.Healthy)
	assert.Empty(t, st.Live.Reason)
	out := b.outputs[len(b.outputs)-1]
	assert.Contains(t, out, "the live release is not healthy")
	assert.Contains(t, out, "worker: exited, exit code 137")
}

// killService kills the service's container of the live release sha: `docker kill`
// (SIGKILL) on the engine, waiting until docker shows it exited; on the fake, the
// release's script from now on shows it exited with the code a SIGKILL leaves.
func (b *box) killService(sha, service string) {
	b.T.Helper()
	if !b.be.engine {
		b.script(fakedocker.Script{Releases: map[string]map[string]fakedocker.Service{sha: {
			service: {States: []fakedocker.State{{State: "exited", ExitCode: sigkilled}}},
		}}})
		return
	}
	id := b.containerID(service)
	b.dockerCLI("kill", id)
	deadline := time.Now().Add(30 * time.Second)
	for b.dockerCLI("inspect", "--format", "{{.State.Status}}", id) != "exited" {
		require.True(b.T, time.Now().Before(deadline), "the killed %s container did not exit within 30s", service)
		time.Sleep(100 * time.Millisecond)
	}
}

// containerIDs maps each service of the project to its container's ID on the engine;
// nil on the fake (its IDs are derived from the up count, see runID).
func (b *box) containerIDs() map[string]string {
	b.T.Helper()
	if !b.be.engine {
		return nil
	}
	return b.psByService("ID")
}

// dockerActivity is what changed the containers since: on the fake, every call of
// the docker program (compose up, down, … — its engine only answers reads); on the
// engine, every lifecycle event of the project's containers (create, start, restart,
// kill, die, stop, destroy), as "action service".
func (b *box) dockerActivity(since time.Time) []string {
	b.T.Helper()
	var out []string
	if !b.be.engine {
		for _, c := range b.DockerCalls("") {
			if !c.Time.Before(since) && (len(c.Argv) == 0 || c.Argv[0] != fakedocker.EngineArgv0) {
				out = append(out, strings.Join(c.Argv, " "))
			}
		}
		return out
	}
	stamp := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	args := []string{"events", "--since", stamp(since), "--until", stamp(time.Now()),
		"--filter", "type=container", "--filter", "label=com.docker.compose.project=" + b.project,
		"--format", `{{.Action}} {{index .Actor.Attributes "com.docker.compose.service"}}`}
	for _, a := range []string{"create", "start", "restart", "kill", "die", "stop", "destroy"} {
		args = append(args, "--filter", "event="+a)
	}
	ev := b.dockerCLI(args...)
	if ev == "" {
		return nil
	}
	return strings.Split(ev, "\n")
}
