package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/logging"
	"github.com/monky/monky-deployd/internal/testbox"
)

func TestMain(m *testing.M) { os.Exit(testbox.Run(m)) }

// handedOverCode is what the stand-in agent next to the tick binary exits with.
const handedOverCode = 42

// stubbed returns the tick binary with a stand-in agent next to it that writes its
// arguments to the file handed-over beside it and exits handedOverCode: a run that
// exits so handed the tick over.
func stubbed(t *testing.T) (tick, marker string) {
	t.Helper()
	dir := t.TempDir()
	tick = filepath.Join(dir, "monky-deployd-tick")
	require.NoError(t, os.Link(testbox.Build(t, testbox.TickPkg), tick))
	marker = filepath.Join(dir, "handed-over")
	stub := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/handed-over\"\nexit 42\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, agentName), []byte(stub), 0o755))
	return tick, marker
}

// liveBox is a box with a release applied by the agent (in process) and tenancy
// answering none: the steady state the tick binary serves.
func liveBox(t *testing.T, bin string) *testbox.Box {
	t.Helper()
	b := testbox.New(t, testbox.Options{Binary: bin})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	a := b.NewAgent(deployd.Options{})
	out, code := b.Tick(a)
	require.Equal(t, deployd.ExitOK, code)
	require.Equal(t, "applied", out.Result)
	require.NoError(t, a.Close())
	b.SetDesired(faketenancy.Desired{Action: "none"})
	return b
}

// editState rewrites the box's state.json through edit.
func editState(t *testing.T, b *testbox.Box, edit func(st *deployd.State)) {
	t.Helper()
	st := b.State()
	edit(&st)
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), data, 0o600))
}

// TestIdleTickByItself: on a box in its steady state the tick binary checks in with
// the live release's health, saves the state and writes the metrics, without the agent.
func TestIdleTickByItself(t *testing.T) {
	tick, marker := stubbed(t)
	b := liveBox(t, tick)
	before := b.State()
	checkins := len(b.Stack.Checkins(b.Env))
	metricsFile := filepath.Join(b.Dir, "monky-deployd.prom")
	res := b.Run(10*time.Second, []string{"run", "--config", b.CfgPath, "--metrics-file", metricsFile})
	require.Equal(t, deployd.ExitOK, res.Code, res.Stderr)
	assert.NoFileExists(t, marker, "the tick was not handed over")
	assert.Contains(t, res.Stderr, `msg="tick done" env_id=env-dev-01 action=none`)

	cs := b.Stack.Checkins(b.Env)
	require.Len(t, cs, checkins+1)
	last := cs[len(cs)-1]
	assert.Equal(t, before.LiveSHA, last.CurrentSHA)
	require.NotNil(t, last.Live)
	require.NotNil(t, last.Live.Healthy)
	assert.True(t, *last.Live.Healthy)
	assert.Len(t, last.Live.Services, 2)

	after := b.State()
	assert.True(t, after.LastCheckin.After(before.LastCheckin))
	assert.True(t, after.LastTick.After(before.LastTick))
	assert.Equal(t, "none", after.LastAction)
	assert.Equal(t, deployd.ExitOK, after.LastExit)
	require.NotNil(t, after.Live)
	assert.True(t, after.Live.ObservedAt.After(before.LastTick))
	assert.Equal(t, before.Failed, after.Failed)

	prom, err := os.ReadFile(metricsFile)
	require.NoError(t, err)
	assert.Contains(t, string(prom), "monky_deployd_live_healthy 1")
	assert.Contains(t, string(prom), "monky_deployd_exit_code 0")
}

// TestSameAsTheAgent: the tick binary's idle tick sends the check-in the agent's
// would and leaves the same state.json, times apart.
func TestSameAsTheAgent(t *testing.T) {
	tick := testbox.BuildTick(t)
	agent := filepath.Join(filepath.Dir(tick), agentName)
	b := liveBox(t, agent)
	run := func(bin string) (faketenancy.CheckinRequest, map[string]any) {
		cmd := exec.Command(bin, "run", "--config", b.CfgPath)
		cmd.Env = b.ProcEnv("MONKY_DEPLOYD_DEBUG=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		if bin == tick {
			require.NotContains(t, string(out), "handing the tick", "the tick binary did the tick itself")
		}
		cs := b.Stack.Checkins(b.Env)
		data, err := os.ReadFile(b.Cfg.StatePath())
		require.NoError(t, err)
		var st map[string]any
		require.NoError(t, json.Unmarshal(data, &st))
		return cs[len(cs)-1], st
	}
	run(agent) // the first check-in after the apply: the baseline of restarts
	agentReq, agentState := run(agent)
	tickReq, tickState := run(tick)

	require.NotNil(t, agentReq.Live)
	require.NotNil(t, tickReq.Live)
	agentReq.Live.ObservedAt, tickReq.Live.ObservedAt = time.Time{}, time.Time{}
	agentReq.Time, tickReq.Time = time.Time{}, time.Time{}
	assert.Equal(t, agentReq, tickReq, "the check-in")
	for _, st := range []map[string]any{agentState, tickState} {
		for _, k := range []string{"last_checkin", "last_tick", "token_expires", "token_renew_at"} {
			require.Contains(t, st, k)
			delete(st, k)
		}
		st["live"].(map[string]any)["observed_at"] = ""
	}
	assert.Equal(t, agentState, tickState, "state.json")
}

// TestHandsOver: whatever is not a steady-state idle tick goes to the agent, with the
// same arguments; before the check-in unless tenancy asked for more than none.
func TestHandsOver(t *testing.T) {
	tick, marker := stubbed(t)
	cases := []struct {
		name     string
		why      string // in the hand-over's log line
		args     []string
		edit     func(t *testing.T, b *testbox.Box)
		env      []string
		checksIn bool
	}{
		{name: "another command", why: "a command or flag", args: []string{"status", "--config", "CFG"}},
		{name: "run --loop", why: "a command or flag", args: []string{"run", "--loop", "--config", "CFG"}},
		{name: "a stray argument", why: "a command or flag", args: []string{"run", "--config", "CFG", "extra"}},
		{name: "a config that does not load", why: "the config does not load", args: []string{"run", "--config", "/nonexistent/config.yaml"}},
		{name: "the sdk transport", why: "the sdk transport", edit: func(t *testing.T, b *testbox.Box) {
			b.Configure(func(c *deployd.Config) { c.Tenancy.Transport = "sdk" })
		}},
		{name: "the env mismatch latch", why: "AGENT_ENV_MISMATCH latch", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.EnvMismatch = &deployd.Latch{EnvID: b.Env, At: time.Now()} })
		}},
		{name: "a token due for a lookup", why: "due for a lookup", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.TokenRenewAt = time.Now().Add(-time.Second) })
		}},
		{name: "a token never looked up", why: "due for a lookup", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.TokenRenewAt = time.Time{} })
		}},
		{name: "a token past its expiry", why: "has expired", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.TokenExpires = time.Now().Add(-time.Second) })
		}},
		{name: "a token lookup due further ahead than a day", why: "due for a lookup", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.TokenRenewAt = time.Now().Add(25 * time.Hour) })
		}},
		{name: "the clock went back since the last tick", why: "the clock went back", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.LastTick = time.Now().Add(10 * time.Minute) })
		}},
		{name: "a state of another format", why: "another format", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.Schema = 2 })
		}},
		{name: "the run lock held", why: "the run lock", edit: func(t *testing.T, b *testbox.Box) {
			l, err := fsutil.TryLock(b.Cfg.LockPath())
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Unlock() })
		}},
		{name: "a docker version to read again", why: "docker version", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.DockerVersionAt = time.Now().Add(-2 * time.Hour) })
		}},
		{name: "a live release not confirmed", why: "not confirmed or without its services", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.Confirmed = false })
		}},
		{name: "services not recorded", why: "not confirmed or without its services", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.LiveServices = nil })
		}},
		{name: "current disagrees with the state", why: "needs a repair", edit: func(t *testing.T, b *testbox.Box) {
			require.NoError(t, os.Remove(b.Cfg.CurrentLink()))
		}},
		{name: "a leftover of an interrupted apply", why: "needs a repair", edit: func(t *testing.T, b *testbox.Box) {
			require.NoError(t, os.WriteFile(filepath.Join(b.Cfg.ReleasesDir(), ".leftover.bundle"), nil, 0o600))
		}},
		{name: "another env_id in the state", why: "another format or env_id", edit: func(t *testing.T, b *testbox.Box) {
			editState(t, b, func(st *deployd.State) { st.EnvID = "env-dev-99" })
		}},
		{name: "a state that does not parse", why: "state.json does not read", edit: func(t *testing.T, b *testbox.Box) {
			require.NoError(t, os.WriteFile(b.Cfg.StatePath(), []byte("{"), 0o600))
		}},
		{name: "no token", why: "no OpenBao token", edit: func(t *testing.T, b *testbox.Box) {
			require.NoError(t, os.Remove(b.Cfg.TokenPath()))
		}},
		{name: "a docker the Engine API client does not speak", why: "read through the CLI", env: []string{"DOCKER_HOST=ssh://box"}},
		{name: "tenancy asks for an apply", why: "tenancy asked for apply", checksIn: true, edit: func(t *testing.T, b *testbox.Box) {
			b.Publish(faketenancy.SampleApp(b.Env, 2))
		}},
		{name: "tenancy refuses the token", why: "the check-in failed", checksIn: true, edit: func(t *testing.T, b *testbox.Box) {
			b.Stack.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 401}})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(marker)
			b := liveBox(t, tick)
			if tc.edit != nil {
				tc.edit(t, b)
			}
			args := tc.args
			if args == nil {
				args = []string{"run", "--config", "CFG"}
			}
			args = append([]string(nil), args...)
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, "CFG", b.CfgPath)
			}
			checkins := b.TenancyCalls("/v1/agent/checkin")
			res := b.Run(10*time.Second, args, append([]string{"MONKY_DEPLOYD_DEBUG=1"}, tc.env...)...)
			require.Equal(t, handedOverCode, res.Code, res.Stderr)
			assert.Contains(t, res.Stderr, "handing the tick to the full agent")
			assert.Contains(t, res.Stderr, tc.why)
			got, err := os.ReadFile(marker)
			require.NoError(t, err)
			assert.Equal(t, strings.Join(args, "\n")+"\n", string(got), "the agent gets the same arguments")
			want := checkins
			if tc.checksIn {
				want++
			}
			assert.Equal(t, want, b.TenancyCalls("/v1/agent/checkin"), "check-ins")
		})
	}
}

// TestTemporaryByItself: tenancy unavailable ends the tick with 75 as the agent's
// would, with the code and Retry-After in the state; nothing is handed over.
func TestTemporaryByItself(t *testing.T) {
	tick, marker := stubbed(t)
	b := liveBox(t, tick)
	b.Stack.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}, RetryAfter: 7 * time.Second})
	res := b.Run(10*time.Second, []string{"run", "--config", b.CfgPath})
	require.Equal(t, deployd.ExitTemporary, res.Code, res.Stderr)
	assert.NoFileExists(t, marker)
	assert.Contains(t, res.Stderr, "tenancy unavailable; exiting 75, the next tick retries")
	st := b.State()
	assert.Equal(t, "UNAVAILABLE", string(st.LastTemporary))
	assert.Equal(t, 7*time.Second, st.RetryAfter)
	assert.Equal(t, deployd.ExitTemporary, st.LastExit)
}

// TestNoAgentNextToIt: a tick to hand over with no agent beside the binary exits 1
// and says what to do.
func TestNoAgentNextToIt(t *testing.T) {
	dir := t.TempDir()
	tick := filepath.Join(dir, "monky-deployd-tick")
	require.NoError(t, os.Link(testbox.Build(t, testbox.TickPkg), tick))
	out, err := exec.Command(tick, "version").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Contains(t, string(out), "could not hand the tick to the full agent; reinstall monky-deployd")
	assert.Contains(t, string(out), filepath.Join(dir, agentName))
}

// TestLinksOnlyLightPackages: the tick binary links none of what makes the agent's
// start slow, and no test code.
func TestLinksOnlyLightPackages(t *testing.T) {
	out, err := exec.Command(testbox.GoTool(t), "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/monky/monky-deployd/internal/heartbeat", "the list is the tick binary's")
	heavy := []string{
		"github.com/openziti/", "github.com/hashicorp/", "github.com/compose-spec/", "github.com/santhosh-tekuri/",
		"github.com/asaskevich/", "github.com/distribution/", "github.com/monky/monky-deployd/deployd/bao",
		"github.com/monky/monky-deployd/deployd/bundle", "github.com/monky/monky-deployd/internal/release",
		"github.com/monky/monky-deployd/internal/transport/zititransport", "github.com/stretchr/", "testing",
		"github.com/monky/monky-deployd/internal/fakes/", "github.com/monky/monky-deployd/internal/testbox",
	}
	for _, d := range deps {
		assert.NotEqual(t, "github.com/monky/monky-deployd/deployd", d, "the tick binary links package deployd")
		for _, h := range heavy {
			assert.False(t, d == strings.TrimSuffix(h, "/") || strings.HasPrefix(d, h), "the tick binary links %s", d)
		}
	}
}

// TestStoppedIsNotHandedOver: a tick stopped by a signal (its context cancelled)
// before the check-in ends with 75, as the agent's would, and never starts the agent.
func TestStoppedIsNotHandedOver(t *testing.T) {
	b := liveBox(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr strings.Builder
	r := tick(ctx, []string{"run", "--config", b.CfgPath}, b.ProcEnv(), &stderr)
	assert.Empty(t, r.handover)
	assert.Equal(t, deployd.ExitTemporary, r.exit)
	assert.Contains(t, stderr.String(), "the tick was stopped mid-way; exiting 75")
}

// TestStateNotSavedFails: a state that cannot be saved fails the tick (exit 1,
// STATE_UNAVAILABLE), as it fails the agent's, and says so.
func TestStateNotSavedFails(t *testing.T) {
	b := liveBox(t, "")
	var stderr strings.Builder
	x := &box{cfg: b.Cfg, red: secret.NewRedactor(), start: time.Now()}
	x.log = logging.ForAgent(&stderr, nil, x.red.Handler)
	x.cfg.StateDir = filepath.Join(b.Dir, "gone")
	st := b.State()
	r := x.finish(&st, result{exit: deployd.ExitOK, action: "none"}, "")
	assert.Equal(t, deployd.ExitFailed, r.exit)
	assert.Equal(t, codes.StateUnavailable, r.code)
	assert.Contains(t, stderr.String(), "could not save the state")
	assert.Contains(t, stderr.String(), `msg="tick failed"`)
	assert.NotContains(t, stderr.String(), "tick done")
}
