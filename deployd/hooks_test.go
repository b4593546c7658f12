package deployd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
)

// hookServices are the sample app's hook services: behind the monky-hooks profile,
// with the release's DB_PASSWORD in their environment.
const hookServices = `  backup:
    image: busybox:1.36
    command: ["sh", "-c", "echo backing up"]
    environment:
      DB_PASSWORD: ${DB_PASSWORD}
    profiles: [monky-hooks]
  smoke:
    image: busybox:1.36
    command: ["true"]
    profiles: [monky-hooks]
`

// hookApp is the sample app of serial with the hook services, restore and hooks.
func hookApp(env string, serial int64, restore string, hooks *faketenancy.HooksSpec) faketenancy.BundleSpec {
	bn := faketenancy.SampleApp(env, serial)
	bn.Files["compose.yaml"] += hookServices
	bn.Restore, bn.Hooks = restore, hooks
	return bn
}

func beforeHook(h ...faketenancy.HookSpec) *faketenancy.HooksSpec {
	return &faketenancy.HooksSpec{BeforeSwitch: h}
}

func afterHook(h ...faketenancy.HookSpec) *faketenancy.HooksSpec {
	return &faketenancy.HooksSpec{AfterSwitch: h}
}

// TestRestoreSafety: a release that says restore: unsafe and fails its health check
// after the switch is not restored: it stays live as compose left it, the report and
// status say so and that a person decides; the same release marked safe is restored.
func TestRestoreSafety(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		restore  string
		restored bool
	}{{"unsafe", false}, {"safe", true}, {"", true}} {
		t.Run("restore="+tc.restore, func(t *testing.T) {
			b, good := liveBox(t)
			bad := b.Publish(hookApp(b.Env, 2, tc.restore, nil))
			b.scriptRelease(bad, "web", fakedocker.State{Health: "unhealthy"})
			out := b.tickEnds(deployd.ExitFailed, codes.Unhealthy)
			rep := b.LastReport()
			st := b.State()
			status := b.agent.Status()
			if tc.restored {
				assert.Equal(t, deployd.RestoreHealthy, out.Restore)
				assert.Equal(t, good, b.Live())
				assert.Len(t, b.DockerCalls("up"), 3)
				return
			}
			assert.Equal(t, deployd.RestoreSkipped, out.Restore)
			assert.Equal(t, bad, b.Live(), "the failed release stays live")
			assert.Equal(t, bad, st.LiveSHA)
			assert.False(t, st.Confirmed)
			assert.Len(t, b.DockerCalls("up"), 2, "no up of the previous release")
			assert.Empty(t, b.DockerCalls("down"), "nothing taken down")
			assert.Equal(t, "failed", rep.Result)
			assert.Contains(t, rep.Detail, "restore: not-restored "+good[:12])
			assert.Contains(t, rep.Detail, "restore: unsafe")
			assert.Contains(t, rep.Tail, "health of web", "the health evidence is reported")
			assert.Equal(t, deployd.VerdictCritical, status.Verdict)
			assert.Contains(t, status.Text(), "a person decides")
			require.NotNil(t, status.LastRestore)
			assert.True(t, status.LastRestore.Degraded, "the metric monky_deployd_last_restore is 1")
			assert.NotContains(t, status.Text(), "left the box degraded", "one problem, with its own next step")
			assert.Contains(t, st.Failed, bad)

			// Tenancy asks for the same sha again: told again, no lease, nothing restored.
			out = b.tickExits(deployd.ExitFailed)
			assert.False(t, out.Leased)
			assert.Equal(t, bad, b.Live())
			// A down is a person's decision: status asks for none any more.
			b.SetDesired(faketenancy.Desired{Action: "down"})
			b.tickExits(deployd.ExitOK)
			assert.Equal(t, "", b.Live())
			assert.Nil(t, b.State().LastRestore)
			assert.NotContains(t, b.agent.Status().Text(), "a person decides")
			// A fixed release goes on as any apply does.
			fixed := b.apply(hookApp(b.Env, 3, "unsafe", nil))
			assert.Equal(t, fixed, b.Live())
			assert.Nil(t, b.State().LastRestore)
		})
	}
}

// TestBeforeHookFails: a hook before the switch that fails stops the apply with
// nothing switched (the live release's containers untouched, no up) and one lease
// spent, reported as HOOK_FAILED with its output redacted, remembered against the
// sha.
func TestBeforeHookFails(t *testing.T) {
	t.Parallel()
	b, good := liveBox(t)
	idsBefore := liveContainerIDs(t, b)
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Hooks: map[string]fakedocker.Hook{
		"backup": {Stdout: "dumping the database\n", Stderr: "pg_dump: error: connection refused\n", Exit: 3, Echo: []string{"DB_PASSWORD"}},
	}}))
	leases := b.Leases()
	sha := b.Publish(hookApp(b.Env, 2, "unsafe", beforeHook(faketenancy.HookSpec{Service: "backup"})))
	out := b.tickEnds(deployd.ExitFailed, codes.HookFailed)
	assert.Equal(t, "", out.Restore, "nothing to restore")
	assert.Equal(t, leases+1, b.Leases(), "one lease")
	assert.Equal(t, good, b.Live())
	assert.Len(t, b.DockerCalls("up"), 1, "no up of the new release")
	assert.Equal(t, idsBefore, liveContainerIDs(t, b), "the live containers are untouched")
	runs := b.DockerCalls("run")
	require.Len(t, runs, 1)
	argv := strings.Join(runs[0].Argv, " ")
	assert.Contains(t, argv, "--profile monky-hooks run --rm --no-deps -T --name monky-hook-backup-")
	assert.Equal(t, sha, filepath.Base(projectDir(runs[0].Argv)), "run from the staged release")

	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Contains(t, rep.Detail, "before_switch hook backup exited 3: nothing was switched")
	assert.Contains(t, rep.Tail, "pg_dump: error: connection refused")
	assert.Contains(t, rep.Tail, "DB_PASSWORD=")
	assertNoCanary(t, b, rep)
	st := b.State()
	require.Contains(t, st.Failed, sha)
	assert.Equal(t, codes.HookFailed, st.Failed[sha].Code)
	assert.Contains(t, st.Failed[sha].Evidence, "dumping the database")
	assert.Contains(t, strings.Join(b.agent.Status().Hooks, "\n"), "before_switch backup")

	// Asked again: told again, no lease, the hook does not run again.
	out = b.tickExits(deployd.ExitFailed)
	assert.False(t, out.Leased)
	assert.Len(t, b.DockerCalls("run"), 1)
}

// assertNoCanary: the secret in the hook's environment is nowhere: report, state,
// log.
func assertNoCanary(t *testing.T, b *box, rep faketenancy.Report) {
	t.Helper()
	assert.NotContains(t, rep.Tail+rep.Detail, testbox.DefaultSecret)
	state, err := os.ReadFile(b.Cfg.StatePath())
	require.NoError(t, err)
	assert.NotContains(t, string(state), testbox.DefaultSecret)
	assert.NotContains(t, b.Logs.String(), testbox.DefaultSecret)
	assert.NotContains(t, b.agent.Status().Text(), testbox.DefaultSecret)
}

// liveContainerIDs names the live project's containers: the fake's container IDs
// are made of the project directory and the count of ups.
func liveContainerIDs(t *testing.T, b *box) string {
	t.Helper()
	st := b.DockerStatus()
	require.True(t, st.Up)
	return fmt.Sprintf("%s#%d", st.Dir, st.Generation)
}

// TestBeforeHookLater: exit 75 is "try again later": exit 75, no report, nothing
// held; the next tick runs the hook again under the same lease and applies.
func TestBeforeHookLater(t *testing.T) {
	t.Parallel()
	b, good := liveBox(t)
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Hooks: map[string]fakedocker.Hook{
		"backup": {Stdout: "replica lagging, later\n", Exit: 75, FailTimes: 2},
	}}))
	reports := len(b.Stack.Tenancy.Reports(b.Env))
	leases := b.Leases()
	sha := b.Publish(hookApp(b.Env, 2, "", beforeHook(faketenancy.HookSpec{Service: "backup"})))
	for range 2 {
		b.tickEnds(deployd.ExitTemporary, codes.HookLater)
		assert.Equal(t, good, b.Live())
		assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "no report")
		assert.NotContains(t, b.State().Failed, sha)
	}
	b.tickApplied()
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, leases+1, b.Leases(), "one lease for three ticks")
	assert.Len(t, b.DockerCalls("run"), 3)
}

// TestAfterHookFailure: a smoke test after the switch that fails counts as
// unhealthy: restored when the release says restore is safe, left for a person when
// it says unsafe.
func TestAfterHookFailure(t *testing.T) {
	t.Parallel()
	for _, restore := range []string{"safe", "unsafe"} {
		t.Run(restore, func(t *testing.T) {
			b, good := liveBox(t)
			require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Hooks: map[string]fakedocker.Hook{
				"smoke": {Stderr: "GET /health: 500\n", Exit: 1},
			}}))
			bad := b.Publish(hookApp(b.Env, 2, restore, afterHook(faketenancy.HookSpec{Service: "smoke"})))
			out := b.tickEnds(deployd.ExitFailed, codes.HookFailed)
			assert.Contains(t, b.LastReport().Tail, "GET /health: 500")
			assert.Contains(t, b.LastReport().Detail, "after_switch hook smoke exited 1")
			if restore == "safe" {
				assert.Equal(t, deployd.RestoreHealthy, out.Restore)
				assert.Equal(t, good, b.Live())
			} else {
				assert.Equal(t, deployd.RestoreSkipped, out.Restore)
				assert.Equal(t, bad, b.Live())
			}
		})
	}
}

// TestAfterHookRunsOnceHealthy: the smoke test runs after the health wait, and an
// applied release ran it.
func TestAfterHookRunsOnceHealthy(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	sha := b.apply(hookApp(b.Env, 1, "", afterHook(faketenancy.HookSpec{Service: "smoke"})))
	assert.Equal(t, sha, b.Live())
	calls := b.DockerCalls("")
	lastPS, run := -1, -1
	for i, c := range calls {
		switch {
		case c.EngineCommand() == "ps" || strings.Contains(strings.Join(c.Argv, " "), " ps "):
			if run < 0 {
				lastPS = i
			}
		case strings.Contains(strings.Join(c.Argv, " "), " run "):
			run = i
		}
	}
	require.GreaterOrEqual(t, run, 0)
	assert.Less(t, lastPS, run, "the health wait read the containers before the smoke test")
	assert.NotContains(t, strings.Join(b.DockerStatus().Services, ","), "smoke", "up leaves the hook services out")
}

// TestHookTimeout: a hook that does not finish within its timeout fails, and its
// container is removed.
func TestHookTimeout(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Delay: "60s"}}}})
	b.Publish(hookApp(b.Env, 1, "", beforeHook(faketenancy.HookSpec{Service: "backup", TimeoutSeconds: 1})))
	start := time.Now()
	out, code := b.tick()
	assert.Less(t, time.Since(start), 25*time.Second, "the hook's 1s timeout ends it, not its 60s (nor the tick's own 30s bound)")
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.HookFailed, out.Code)
	assert.Contains(t, b.LastReport().Detail, "did not finish within 1s; its container was removed")
	rm := b.DockerCalls("rm")
	require.Len(t, rm, 1)
	assert.Contains(t, strings.Join(rm[0].Argv, " "), "rm -f -- monky-hook-backup-")
	assert.Equal(t, "", b.Live())
}

// tickStoppedInAHook runs a tick that is stopped (its context cancelled) once docker
// runs a hook; it must end 75.
func (b *box) tickStoppedInAHook() {
	b.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for len(b.DockerCalls("run")) == 0 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	_, err := b.agent.Tick(ctx)
	require.Equal(b.T, deployd.ExitTemporary, deployd.ExitCode(err))
}

// TestHookInterrupted: a tick stopped in a hook leaves it recorded as running; the
// next tick goes on under the same lease, removes its container and runs it again
// only when the release marks it repeatable, else reports HOOK_INTERRUPTED.
func TestHookInterrupted(t *testing.T) {
	t.Parallel()
	for _, repeatable := range []bool{true, false} {
		t.Run(map[bool]string{true: "repeatable", false: "once"}[repeatable], func(t *testing.T) {
			b := newBox(t, boxOptions{script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Delay: "20s"}}}})
			b.idleTick()
			sha := b.Publish(hookApp(b.Env, 1, "", beforeHook(faketenancy.HookSpec{Service: "backup", Repeatable: repeatable})))
			b.tickStoppedInAHook()
			st := b.State()
			require.NotNil(t, st.Hooks)
			require.NotNil(t, st.Hooks.Running, "the hook is recorded as running")
			assert.Equal(t, "backup", st.Hooks.Running.Service)
			assert.Equal(t, 1, b.Leases())

			require.NoError(t, b.Docker.SetScript(nil))
			out, code := b.tick()
			assert.False(t, out.Leased, "no second lease")
			assert.Equal(t, 1, b.Leases())
			assert.Len(t, b.DockerCalls("rm"), 1, "the interrupted hook's container is removed")
			if repeatable {
				require.Equal(t, deployd.ExitOK, code)
				assert.Equal(t, sha, b.Live())
				assert.Len(t, b.DockerCalls("run"), 2)
				return
			}
			assert.Equal(t, deployd.ExitFailed, code)
			assert.Equal(t, codes.HookInterrupted, out.Code)
			assert.Equal(t, "", b.Live(), "nothing switched")
			assert.Len(t, b.DockerCalls("run"), 1, "not run again")
			assert.Contains(t, b.LastReport().Detail, "does not mark it repeatable")
		})
	}
}

// TestPlanShowsHooks: plan names the hooks an apply would run and whether a failure
// after the switch would be restored, and runs none of them.
func TestPlanShowsHooks(t *testing.T) {
	t.Parallel()
	b := idleBox(t)
	b.applySample(1)
	b.Publish(hookApp(b.Env, 2, "unsafe", &faketenancy.HooksSpec{
		BeforeSwitch: []faketenancy.HookSpec{{Service: "backup", TimeoutSeconds: 60}},
		AfterSwitch:  []faketenancy.HookSpec{{Service: "smoke", Repeatable: true}},
	}))
	p, err := b.plan()
	require.NoError(t, err)
	assert.Equal(t, []deployd.PlanHook{
		{Phase: "before_switch", Service: "backup", TimeoutSeconds: 60},
		{Phase: "after_switch", Service: "smoke", TimeoutSeconds: 300, Repeatable: true},
	}, p.Hooks)
	assert.Equal(t, "unsafe", p.Restore)
	text := p.Text()
	assert.Contains(t, text, "hook: before_switch backup (timeout 60s, not run again after a crash (a person decides)): before the switch")
	assert.Contains(t, text, "hook: after_switch smoke (timeout 300s, run again after a crash): after the switch")
	assert.Contains(t, text, "restore: unsafe: a failure after the switch is NOT restored")
	for _, s := range p.Services {
		assert.NotContains(t, []string{"backup", "smoke"}, s.Name, "a hook is not a service of the release's up")
	}
	assert.Empty(t, b.DockerCalls("run"), "plan runs no hook")

	b.Publish(hookApp(b.Env, 3, "", nil))
	p, err = b.plan()
	require.NoError(t, err)
	assert.Empty(t, p.Hooks)
	assert.Equal(t, "safe", p.Restore)
	assert.Contains(t, p.Text(), "restore: safe: a failure after the switch restores the live release")
}

// TestHookInvalidCostsNoLease: a manifest whose hook names a missing or a
// long-running service is refused before the lease with HOOK_INVALID, and held.
func TestHookInvalidCostsNoLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, service, detail string }{
		{"missing", "restore-db", "hook service restore-db is not a service of the compose files"},
		{"long-running", "web", "hook service web is not behind the monky-hooks profile"},
		{"restart always", "daemon", "hook service daemon has restart always"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := idleBox(t)
			bn := hookApp(b.Env, 1, "", beforeHook(faketenancy.HookSpec{Service: tc.service}))
			bn.Files["compose.yaml"] += "  daemon:\n    image: busybox:1.36\n    restart: always\n    profiles: [monky-hooks]\n"
			sha := b.Publish(bn)
			out := b.tickEnds(deployd.ExitFailed, codes.HookInvalid)
			assert.False(t, out.Leased)
			assert.Equal(t, 0, b.Leases())
			assert.Contains(t, b.LastReport().Detail, tc.detail)
			assert.Equal(t, codes.HookInvalid, b.State().Failed[sha].Code)
		})
	}
}

// TestStaleHookOfAnotherSHA: a hook a crash left running, of a sha tenancy no longer
// asks for, has its container removed when the next sha's hooks run.
func TestStaleHookOfAnotherSHA(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Delay: "20s"}}}})
	b.idleTick()
	b.Publish(hookApp(b.Env, 1, "", beforeHook(faketenancy.HookSpec{Service: "backup"})))
	b.tickStoppedInAHook()
	stale := b.State().Hooks.Running.Container

	require.NoError(t, b.Docker.SetScript(nil))
	sha := b.apply(hookApp(b.Env, 2, "", beforeHook(faketenancy.HookSpec{Service: "backup"})))
	assert.Equal(t, sha, b.Live())
	rm := b.DockerCalls("rm")
	require.Len(t, rm, 1)
	assert.Contains(t, rm[0].Argv, stale)
}
