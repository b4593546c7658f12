package deployd_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestLiveHealthInEveryCheckin: after an apply every check-in carries the live
// release's health; a container that dies later turns it unhealthy, and the tick that
// sees it takes no lease, runs no compose command and reports nothing: it only tells.
func TestLiveHealthInEveryCheckin(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	b.tickExits(deployd.ExitOK)
	_, ok := b.Stack.Tenancy.LastLive(b.Env)
	assert.False(t, ok, "nothing live yet: the check-in carries no live object")

	sha := b.applySample(1)
	b.idleTick()
	live := b.lastLive()
	require.NotNil(t, live.Healthy)
	assert.True(t, *live.Healthy)
	assert.Empty(t, live.Reason)
	require.NotEmpty(t, live.Services)
	for _, s := range live.Services {
		assert.Equal(t, "running", s.State, s.Name)
	}

	// The web container dies an hour later.
	web := live.Services[len(live.Services)-1].Name
	b.scriptRelease(sha, web, fakedocker.State{State: "exited", ExitCode: 137, RestartCount: 2})
	leases, reports := b.Leases(), len(b.Stack.Tenancy.Reports(b.Env))
	ups, downs := len(b.DockerCalls("up")), len(b.DockerCalls("down"))
	out := b.tickExits(deployd.ExitOK)
	assert.Equal(t, "none", out.Action)
	live = b.lastLive()
	require.NotNil(t, live.Healthy)
	assert.False(t, *live.Healthy, "the check-in tells tenancy")
	dead := live.Services[len(live.Services)-1]
	assert.Equal(t, faketenancy.LiveService{Name: web, State: "exited", ExitCode: 137, Restarts: 2}, dead)
	assert.Equal(t, leases, b.Leases(), "no lease")
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "no report")
	assert.Len(t, b.DockerCalls("up"), ups, "no compose up")
	assert.Len(t, b.DockerCalls("down"), downs, "no compose down")
	assert.Equal(t, sha, b.State().LiveSHA, "nothing changed on the box")

	st := b.State()
	require.NotNil(t, st.Live)
	assert.False(t, st.Live.Healthy)
	assert.Equal(t, sha, st.Live.SHA)
	assert.Contains(t, b.Logs.String(), "the live release is not healthy")
	assert.Contains(t, b.Logs.String(), web+": exited, exit code 137, restarted 2 times")
}

// TestLiveHealthWhenDockerCannotBeAsked: the check-in goes out with a reason.
func TestLiveHealthWhenDockerCannotBeAsked(t *testing.T) {
	t.Parallel()
	b, _ := liveBox(t)
	b.SetDesired(faketenancy.Desired{Action: "none"})
	require.NoError(t, os.Remove(b.Docker.Socket), "dockerd is gone")
	b.newAgent() // as the next timer run would: no connection kept
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code, "the heartbeat does not depend on docker")
	live := b.lastLive()
	assert.Nil(t, live.Healthy)
	assert.Nil(t, live.Services)
	assert.NotEmpty(t, live.Reason)
	assert.Contains(t, live.Reason, b.Docker.Socket, "the reason names the socket")
	assert.Contains(t, b.Logs.String(), "could not read the live release's health")
}

// TestLiveHealthThroughTheCLI: with a DOCKER_HOST the Engine API client does not speak
// (ssh here; the fake docker CLI ignores it), the agent reads through docker compose
// ps and docker inspect, and the live health is the same.
func TestLiveHealthThroughTheCLI(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	b.agent = b.NewAgent(deployd.Options{DockerEnv: dockerEnvWith(b, "DOCKER_HOST=ssh://deploy@box.example"), HealthPoll: 10 * time.Millisecond})
	b.applySample(1)
	b.idleTick()
	live := b.lastLive()
	require.NotNil(t, live.Healthy)
	assert.True(t, *live.Healthy)
	assert.Len(t, live.Services, 2)
	for _, c := range b.DockerCalls("") {
		assert.NotEqual(t, "engine", c.Argv[0], "no Engine API request: %v", c.Argv)
	}
	assert.NotEmpty(t, b.DockerCalls("ps"), "read through docker compose ps")
}

// TestLiveHealthTellsAStoppedServiceFromADoneOneShot: a one-shot seen done when the
// release came up stays ready when exited 0; a service that stops with exit 0 later
// (docker compose stop, a reboot without a restart policy) is not ready.
func TestLiveHealthTellsAStoppedServiceFromADoneOneShot(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	done := fakedocker.State{State: "exited", ExitCode: 0}
	b.scriptRelease(sha, "migrate", done)
	b.tickExits(deployd.ExitOK)
	st := b.State()
	assert.Equal(t, []string{"migrate", "web"}, st.LiveServices)
	assert.Equal(t, []string{"migrate"}, st.LiveOneShots)

	b.SetDesired(faketenancy.Desired{Action: "none"})
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Releases: map[string]map[string]fakedocker.Service{
		sha: {"migrate": {States: []fakedocker.State{done}}, "web": {States: []fakedocker.State{done}}},
	}}))
	b.tickExits(deployd.ExitOK)
	live := b.lastLive()
	require.NotNil(t, live.Healthy)
	assert.False(t, *live.Healthy, "web stopped: not healthy, though it exited 0")
	require.Len(t, live.Services, 2)
	assert.Equal(t, "exited", live.Services[1].State)
	assert.True(t, b.State().Live.Services[0].Ready, "migrate is a one-shot that is done")
	assert.False(t, b.State().Live.Services[1].Ready)
}

// TestLiveHealthOfAStateWithoutServices: a state written by an older agent (or
// repaired) has no record of the live release's services; the check-in reads them from
// the release and records them, so that a service with no container is "missing".
func TestLiveHealthOfAStateWithoutServices(t *testing.T) {
	t.Parallel()
	b, _ := liveBox(t)
	b.editState(func(raw map[string]any) {
		delete(raw, "live_services")
		delete(raw, "live_one_shots")
	})

	b.idleTick()
	assert.Equal(t, []string{"migrate", "web"}, b.State().LiveServices, "read from the release and recorded")
	live := b.lastLive()
	assert.Len(t, live.Services, 2)
}

// TestRetryOfAnUnhealthyLiveReleaseRunsItAgain: tenancy's answer to an unhealthy live
// release is apply of the same sha with retry: the agent runs compose up on it again,
// without a new lease, and reports what it finds.
func TestRetryOfAnUnhealthyLiveReleaseRunsItAgain(t *testing.T) {
	t.Parallel()
	b, sha := liveBox(t)
	leases, ups := b.Leases(), len(b.DockerCalls("up"))

	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha, Retry: true})
	b.tickApplied()
	assert.Len(t, b.DockerCalls("up"), ups+1, "compose up ran again")
	assert.Equal(t, leases, b.Leases(), "no new lease: the release is staged with its .env")

	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha})
	b.tickExits(deployd.ExitOK)
	assert.Len(t, b.DockerCalls("up"), ups+1, "without retry the live, confirmed sha is only reported again")
}

// TestHeartbeatDoesNotDependOnLive: a live object the tenancy client refuses (here a
// service with no name, from a hand-edited state.json) is replaced by a reason, and the
// check-in goes out.
func TestHeartbeatDoesNotDependOnLive(t *testing.T) {
	t.Parallel()
	b, _ := liveBox(t)
	b.editState(func(raw map[string]any) {
		raw["live_services"] = []string{"", "web"}
	})

	b.SetDesired(faketenancy.Desired{Action: "none"})
	checkins := len(b.Stack.Tenancy.Checkins(b.Env))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code, "the heartbeat went out")
	assert.Len(t, b.Stack.Tenancy.Checkins(b.Env), checkins+1)
	live := b.lastLive()
	assert.Nil(t, live.Healthy)
	assert.Contains(t, live.Reason, "refused by the client")
	assert.Contains(t, b.Logs.String(), "the live health read from docker cannot be sent")
}

// TestEngineVersionIsChecked: a server version the engine answers goes through the
// same check as the CLI's: one that is not a version is not sent.
func TestEngineVersionIsChecked(t *testing.T) {
	b := newBox(t, boxOptions{script: &fakedocker.Script{ServerVersion: "27.3.1\x1b[2J"}})
	b.tickExits(deployd.ExitOK)
	cs := b.Stack.Tenancy.Checkins(b.Env)
	require.NotEmpty(t, cs)
	assert.Empty(t, cs[len(cs)-1].Host.DockerVersion)
}

// TestLiveHealthSeesRestartsSinceTheLastCheckin: a service without a healthcheck that
// crash-loops can be seen running at every check-in; a restart count that rose since
// the last one makes it not ready for that check-in.
func TestLiveHealthSeesRestartsSinceTheLastCheckin(t *testing.T) {
	t.Parallel()
	b, sha := liveBox(t)
	b.SetDesired(faketenancy.Desired{Action: "none"})
	restarts := func(n int) {
		b.scriptRelease(sha, "migrate", fakedocker.State{RestartCount: n})
	}
	healthy := func() bool {
		live := b.lastLive()
		require.NotNil(t, live.Healthy)
		return *live.Healthy
	}
	b.tickExits(deployd.ExitOK)
	assert.True(t, healthy(), "the first check-in after the apply: the baseline")
	restarts(1)
	b.tickExits(deployd.ExitOK)
	assert.False(t, healthy(), "migrate restarted since the last check-in")
	assert.Contains(t, b.Logs.String(), "migrate: running, restarted 1 times (restarted since the last check-in)")
	b.tickExits(deployd.ExitOK)
	assert.True(t, healthy(), "no restart since the last check-in")
	restarts(4)
	b.tickExits(deployd.ExitOK)
	assert.False(t, healthy())
	restarts(0)
	b.tickExits(deployd.ExitOK)
	assert.True(t, healthy(), "a count that fell (containers recreated) says nothing")
}
