package engine

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// migrateApp is a backend with its database migration: a one-shot migrate service
// that web waits for (service_completed_successfully); web is unhealthy when healthy
// is false.
func migrateApp(healthy bool) string {
	web := strings.Replace(webService, "    environment:\n", "    depends_on:\n      migrate:\n        condition: service_completed_successfully\n    environment:\n", 1)
	if !healthy {
		web = strings.Replace(web, "SERVICE: web", "SERVICE: web\n      HEALTHY: \"0\"", 1)
	}
	return "services:\n" + web + `  migrate:
    image: {{image}}
    command: ["exit", "0"]
    environment:
      SERVICE: migrate
`
}

// migrateScript: on the fake, migrate is done at once, and the release bad's web is
// unhealthy.
func migrateScript(bad string) fakedocker.Script {
	s := fakedocker.Script{Services: map[string]fakedocker.Service{"migrate": {States: []fakedocker.State{{State: "exited", ExitCode: 0}}}}}
	if bad != "" {
		s.Releases = map[string]map[string]fakedocker.Service{bad: {"web": {States: []fakedocker.State{{Health: "unhealthy"}}}}}
	}
	return s
}

// migrateRestore: a release that migrates its database and fails its health check is
// not restored when it says restore: unsafe (the failed release stays as compose
// left it, the report and status say so), and restored when it says safe.
func migrateRestore(t *testing.T, be backend, restore string) {
	b := newBox(t, be, boxOpts{})
	vars := map[string]string{"LOG_LEVEL": "info"}
	b.script(migrateScript(""))
	good := b.publish(release{compose: migrateApp(true), vars: vars, secret: true})
	require.Equal(t, 0, b.tick())
	bad := b.publish(release{compose: migrateApp(false), vars: vars, secret: true, restore: restore})
	b.script(migrateScript(bad))
	assert.Equal(t, 1, b.tick())
	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, "UNHEALTHY", rep.Code)
	assert.Contains(t, rep.Tail, "--- health of web")
	assert.Equal(t, 2, b.Leases())
	if restore == "unsafe" {
		assert.Contains(t, rep.Detail, "restore: not-restored "+good[:12])
		assert.Contains(t, rep.Detail, "restore: unsafe")
		assert.Equal(t, bad, b.Live(), "the failed release stays live")
		status := b.status()
		assert.Contains(t, status, "a person decides")
		assert.Contains(t, status, "last restore:  not-restored")
		if be.engine {
			assert.Equal(t, hashOf("0"), b.envHash("web", "HEALTHY"), "the failed release's web runs, as compose left it")
		}
		return
	}
	assert.Contains(t, rep.Detail, "restore: restored-healthy "+good[:12])
	assert.Equal(t, good, b.Live())
	if be.engine {
		assert.Equal(t, "unset", b.envHash("web", "HEALTHY"), "the previous release's web runs again")
	}
}

// hookServices are a backup hook and a smoke-test hook, behind the monky-hooks
// profile, exiting with backupExit and smokeExit; each prints DB_PASSWORD, which the
// agent must redact.
func hookServices(backupExit, smokeExit string) string {
	hook := func(name, exit string) string {
		return "  " + name + `:
    image: {{image}}
    command: ["hook", "DB_PASSWORD"]
    environment:
      SERVICE: ` + name + `
      HOOK_EXIT: "` + exit + `"
      DB_PASSWORD: ${DB_PASSWORD}
    profiles: [monky-hooks]
`
	}
	return hook("backup", backupExit) + hook("smoke", smokeExit)
}

// markedBackup is web and a backup hook (behind the monky-hooks profile) that marks
// its runs in the marks volume, with the extra environment line env.
func markedBackup(env string) string {
	return "services:\n" + webService + `  backup:
    image: {{image}}
    command: ["hook", "DB_PASSWORD"]
    environment:
      SERVICE: backup
      HOOK_MARK: /marks/backup
      ` + env + `
      DB_PASSWORD: ${DB_PASSWORD}
    volumes:
      - marks:/marks
    profiles: [monky-hooks]
volumes:
  marks: {}
`
}

// hookScript plays the hooks on the fake as testapp's hook command does on the engine.
func hookScript(backupExit, smokeExit int) fakedocker.Script {
	h := func(name string, exit int) fakedocker.Hook {
		return fakedocker.Hook{Stdout: "hook " + name + " running\n", Exit: exit, Echo: []string{"DB_PASSWORD"}}
	}
	return fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": h("backup", backupExit), "smoke": h("smoke", smokeExit)}}
}

// hooksAroundTheSwitch: a failing hook before the switch leaves the live release's
// containers untouched with one lease spent, its output redacted in the report; a
// failing smoke test after the switch restores; passing hooks apply and leave no
// container behind.
func hooksAroundTheSwitch(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	vars := map[string]string{"LOG_LEVEL": "info"}
	both := &faketenancy.HooksSpec{
		BeforeSwitch: []faketenancy.HookSpec{{Service: "backup", TimeoutSeconds: 60}},
		AfterSwitch:  []faketenancy.HookSpec{{Service: "smoke", TimeoutSeconds: 60, Repeatable: true}},
	}
	good := b.publish(release{compose: "services:\n" + webService + hookServices("0", "0"), vars: vars, secret: true})
	require.Equal(t, 0, b.tick())
	if be.engine {
		assert.Equal(t, map[string]string{"web": "running"}, b.containers(), "up leaves the hook services out")
	}
	before := b.runID()

	b.script(hookScript(3, 0))
	b.publish(release{compose: "services:\n" + webService + hookServices("3", "0"), vars: vars, secret: true, hooks: both})
	assert.Equal(t, 1, b.tick())
	rep := b.LastReport()
	assert.Equal(t, "HOOK_FAILED", rep.Code)
	assert.Contains(t, rep.Detail, "before_switch hook backup exited 3: nothing was switched")
	assert.Contains(t, rep.Tail, "hook backup running")
	assert.Contains(t, rep.Tail, "DB_PASSWORD=")
	assert.NotContains(t, rep.Tail, canary)
	assert.Equal(t, good, b.Live())
	assert.Equal(t, before, b.runID(), "the live containers were not touched")
	assert.Equal(t, 2, b.Leases())

	b.script(hookScript(0, 1))
	b.publish(release{compose: "services:\n" + webService + hookServices("0", "1"), vars: vars, secret: true, hooks: both})
	assert.Equal(t, 1, b.tick())
	rep = b.LastReport()
	assert.Equal(t, "HOOK_FAILED", rep.Code)
	assert.Contains(t, rep.Detail, "after_switch hook smoke exited 1")
	assert.Contains(t, rep.Detail, "restore: restored-healthy "+good[:12])
	assert.Equal(t, good, b.Live())

	b.script(hookScript(0, 0))
	ok := b.publish(release{compose: "services:\n" + webService + hookServices("0", "0"), vars: vars, secret: true, hooks: both})
	require.Equal(t, 0, b.tick())
	assert.Equal(t, ok, b.Live())
	assert.Equal(t, "applied", b.LastReport().Result)
	if be.engine {
		assert.Equal(t, map[string]string{"web": "running"}, b.containers(), "the hooks' containers are removed (--rm)")
	}
	assert.Contains(t, b.status(), "hook:")
}

// killInHook: a SIGKILL of the agent inside a hook of phase marked repeatable: the
// next run takes no second lease, removes the killed hook's container (docker left it
// running) and runs the hook again, then applies.
func killInHook(t *testing.T, be backend, phase string) {
	b := newBox(t, be, boxOpts{})
	compose := markedBackup("HOOK_SLEEP: 60s")
	sha := b.publish(release{compose: compose, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true,
		hooks: hooksIn(phase, faketenancy.HookSpec{Service: "backup", TimeoutSeconds: 300, Repeatable: true})})
	b.script(fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Delay: "60s"}}})
	p := b.start("run")
	var name string
	testprog.WaitFor(t, 60*time.Second, "the hook to run", func() bool {
		if !be.engine {
			return len(b.DockerCalls("run")) > 0
		}
		name = b.dockerCLI("ps", "-q", "--filter", "label=com.docker.compose.project="+b.project, "--filter", "label=com.docker.compose.oneoff=True")
		return name != ""
	})
	require.NoError(t, syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL))
	<-p.Done()
	b.outputs = append(b.outputs, p.Output())
	assert.Empty(t, b.Stack.Tenancy.Reports(b.Env), "killed before it could report")
	require.Equal(t, 1, b.Leases())
	if be.engine {
		assert.NotEmpty(t, b.dockerCLI("ps", "-q", "--filter", "id="+name), "the killed hook's container still runs")
	}

	b.script(fakedocker.Script{})
	require.Equal(t, 0, b.tick(), "report: %+v", b.Stack.Tenancy.Reports(b.Env))
	assert.Equal(t, "applied", b.LastReport().Result)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, 1, b.Leases(), "no second lease")
	if be.engine {
		assert.Empty(t, b.dockerCLI("ps", "-aq", "--filter", "id="+name), "the killed hook's container is removed")
		assert.Equal(t, map[string]string{"web": "running"}, b.containers())
	}
}

// laterOnce: a before-switch hook that asks for later (exit 75) once: the run exits
// 75 with no report and nothing switched; the next run runs the hook again under the
// same lease and applies.
func laterOnce(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	vars := map[string]string{"LOG_LEVEL": "info"}
	good := b.publish(release{compose: "services:\n" + webService, vars: vars, secret: true})
	require.Equal(t, 0, b.tick())
	before := b.runID()
	compose := markedBackup(`HOOK_FIRST_EXIT: "75"`)
	sha := b.publish(release{compose: compose, vars: vars, secret: true,
		hooks: &faketenancy.HooksSpec{BeforeSwitch: []faketenancy.HookSpec{{Service: "backup", TimeoutSeconds: 60}}}})
	b.script(fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Exit: 75, FailTimes: 1}}})
	reports := len(b.Stack.Tenancy.Reports(b.Env))
	assert.Equal(t, 75, b.tick())
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "no report")
	assert.Equal(t, good, b.Live())
	assert.Equal(t, before, b.runID(), "nothing switched")
	assert.Equal(t, 2, b.Leases())

	require.Equal(t, 0, b.tick())
	assert.Equal(t, "applied", b.LastReport().Result)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, 2, b.Leases(), "the retry spent no new lease")
}

// hooksIn is a manifest's hooks with h in phase.
func hooksIn(phase string, h faketenancy.HookSpec) *faketenancy.HooksSpec {
	if phase == "after_switch" {
		return &faketenancy.HooksSpec{AfterSwitch: []faketenancy.HookSpec{h}}
	}
	return &faketenancy.HooksSpec{BeforeSwitch: []faketenancy.HookSpec{h}}
}
