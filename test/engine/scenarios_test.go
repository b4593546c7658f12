package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
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

// Compose files of the scenarios. {{image}} is the test image; /app is the test app
// (testapp/main.go): serve, health, exit N, envhash NAME.
const (
	healthcheck = `    healthcheck:
      test: ["CMD", "/app", "health"]
      interval: 500ms
      timeout: 5s
      retries: 2
`
	// slowHealthcheck gives a service that is ready only after READY_AFTER a start
	// period, so that its early failing checks do not make it unhealthy.
	slowHealthcheck = `    healthcheck:
      test: ["CMD", "/app", "health"]
      interval: 500ms
      timeout: 5s
      retries: 2
      start_period: 30s
`
	webService = `  web:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: web
      LOG_LEVEL: ${LOG_LEVEL}
      DB_PASSWORD: ${DB_PASSWORD}
` + healthcheck
	workerService = `  worker:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: worker
`
)

// scenario is one row of the table that runs against the fake docker and the real
// engine with the same steps and the same assertions. What only the engine can show
// (a container's environment, a volume) is checked on the engine in addition.
type scenario struct {
	name string
	run  func(t *testing.T, be backend)
}

var scenarios = []scenario{
	{"apply with a secret and a var, then an idle tick", applyThenIdle},
	{"unhealthy release restores the previous one", unhealthyRestores},
	{"missing image is refused before the lease and the previous release keeps serving", missingImage},
	{"a registry that cannot be reached exits 75 before the lease", registryDown},
	{"images are pulled before the lease, compose up pulls nothing", prePulled},
	{"a service removed between releases is removed", serviceRemoved},
	{"one-shot services: exit 0 is done, non-zero fails with its code", oneShots},
	{"depends_on service_healthy", dependsOnHealthy},
	{"a crash-looping container fails within health_timeout", crashLoop},
	{"down with purge removes volumes on dev", func(t *testing.T, be backend) { downPurge(t, be, "env-dev-01", true) }},
	{"down with purge keeps volumes on prod", func(t *testing.T, be backend) { downPurge(t, be, "env-prod-01", false) }},
	{"SIGKILL during compose up converges without a second lease", killDuringUp},
	{"keep_releases prunes old releases", keepReleases},
	{"live turns unhealthy when a container dies after the apply", liveTurnsUnhealthy},
	{"images of pruned releases are removed, the live and kept ones stay", prunedImages},
	{"a migrating release that fails health with restore: unsafe is not restored", func(t *testing.T, be backend) { migrateRestore(t, be, "unsafe") }},
	{"the same release marked restore: safe is restored", func(t *testing.T, be backend) { migrateRestore(t, be, "safe") }},
	{"hooks before and after the switch", hooksAroundTheSwitch},
	{"SIGKILL inside a repeatable hook before the switch runs it again without a second lease", func(t *testing.T, be backend) { killInHook(t, be, "before_switch") }},
	{"SIGKILL inside a repeatable hook after the switch runs it again without a second lease", func(t *testing.T, be backend) { killInHook(t, be, "after_switch") }},
	{"a hook that asks for later (75) costs no report and no second lease", laterOnce},
}

// TestScenarios runs every scenario on the fake docker, then on the real engine
// (MONKY_ENGINE=1; skipped with the command that enables it otherwise, never in CI).
func TestScenarios(t *testing.T) {
	testprog.SkipIfShort(t)
	for _, be := range []backend{fake, engine} {
		t.Run(be.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, be) })
			}
		})
	}
}

func applyThenIdle(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	sha := b.publish(release{compose: "services:\n" + webService, vars: map[string]string{"LOG_LEVEL": "debug"}, secret: true})
	require.Equal(t, 0, b.tick())
	rep := b.LastReport()
	assert.Equal(t, "applied", rep.Result)
	assert.Equal(t, sha, rep.SHA)
	assert.Equal(t, map[string]string{"web": "running/healthy"}, serviceStates(rep))
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, 1, b.Leases())
	if be.engine {
		want := sha256.Sum256([]byte(canary))
		assert.Equal(t, hex.EncodeToString(want[:]), b.envHash("web", "DB_PASSWORD"), "the secret reached the container")
		assert.Equal(t, hashOf("debug"), b.envHash("web", "LOG_LEVEL"), "the var reached the container")
	}

	// Idle: tenancy answers none; nothing runs, nothing is leased, nothing changes.
	before := b.runID()
	b.Stack.Tenancy.SetDesired(b.Env, faketenancy.Desired{Action: "none"})
	start := time.Now()
	require.Equal(t, 0, b.tick())
	t.Logf("idle tick as a process: %s", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, 1, b.Leases())
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), 1, "an idle tick reports nothing")
	assert.Equal(t, before, b.runID(), "the containers were not touched")
	assert.Contains(t, b.status(), "healthy confirmed: true")
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// runID identifies what runs: the container IDs on the engine, the fake's up count.
func (b *box) runID() string {
	if b.be.engine {
		return b.dockerCLI("ps", "-aq", "--no-trunc", "--filter", "label=com.docker.compose.project="+b.project)
	}
	return strings.Repeat("up ", b.DockerStatus().Calls["up"])
}

func unhealthyRestores(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	good := b.publish(release{compose: "services:\n" + webService + workerService, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	require.Equal(t, 0, b.tick())
	bad := b.publish(release{compose: "services:\n" + strings.Replace(webService, "SERVICE: web", "SERVICE: web\n      HEALTHY: \"0\"", 1) + workerService,
		vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	b.script(fakedocker.Script{Releases: map[string]map[string]fakedocker.Service{bad: {
		"web": {States: []fakedocker.State{{Health: "starting"}, {Health: "unhealthy",
			HealthOutput: "health of web: dependency check failed: connection refused (HEALTHY=0)"}},
			Logs: "web starting, ready after 0s\nweb ready\n"},
	}}})
	start := time.Now()
	assert.Equal(t, 1, b.tick())
	t.Logf("failed apply and verified restore: %s", time.Since(start).Round(time.Millisecond))
	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, "UNHEALTHY", rep.Code)
	assert.Equal(t, bad, rep.SHA)
	assert.Contains(t, rep.Detail, "web: unhealthy")
	assert.Contains(t, rep.Detail, "restore: restored-healthy "+good[:12])
	assert.Contains(t, rep.Tail, "--- health of web (container "+b.project+"-web-1): running, health unhealthy ---")
	assert.Contains(t, rep.Tail, "exit code 1: health of web: dependency check failed: connection refused (HEALTHY=0)")
	assert.Contains(t, rep.Tail, "--- logs of web ---")
	assert.Equal(t, good, b.Live())
	assert.Equal(t, 2, b.Leases())
	assert.Contains(t, b.status(), "last restore:  restored-healthy")
	if be.engine {
		assert.Equal(t, map[string]string{"web": "running", "worker": "running"}, b.containers())
		assert.Contains(t, b.dockerCLI("inspect", "--format", "{{.State.Health.Status}}", b.containerID("web")), "healthy",
			"the restored web is healthy when the tick ends")
	}
}

func serviceRemoved(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	b.publish(release{compose: "services:\n" + webService + workerService, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	require.Equal(t, 0, b.tick())
	assert.Equal(t, map[string]string{"web": "running/healthy", "worker": "running/"}, serviceStates(b.LastReport()))
	b.publish(release{compose: "services:\n" + webService, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	require.Equal(t, 0, b.tick())
	assert.Equal(t, map[string]string{"web": "running/healthy"}, serviceStates(b.LastReport()))
	if be.engine {
		assert.Equal(t, map[string]string{"web": "running"}, b.containers(), "worker's container is gone")
	}
}

func oneShots(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	oneShot := func(code string) string {
		return "services:\n" + webService + `  migrate:
    image: {{image}}
    command: ["exit", "` + code + `"]
    environment:
      SERVICE: migrate
`
	}
	b.script(fakedocker.Script{Services: map[string]fakedocker.Service{
		"migrate": {States: []fakedocker.State{{State: "exited", ExitCode: 0}}}}})
	good := b.publish(release{compose: oneShot("0"), vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	require.Equal(t, 0, b.tick())
	assert.Equal(t, map[string]string{"web": "running/healthy", "migrate": "exited/"}, serviceStates(b.LastReport()))

	bad := b.publish(release{compose: oneShot("3"), vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	b.script(fakedocker.Script{
		Services: map[string]fakedocker.Service{"migrate": {States: []fakedocker.State{{State: "exited", ExitCode: 0}}}},
		Releases: map[string]map[string]fakedocker.Service{bad: {
			"migrate": {States: []fakedocker.State{{State: "exited", ExitCode: 3}}, Logs: "one-shot migrate exits with code 3\n"},
		}},
	})
	assert.Equal(t, 1, b.tick())
	rep := b.LastReport()
	assert.Equal(t, "UNHEALTHY", rep.Code)
	assert.Contains(t, rep.Detail, "migrate: exited with code 3")
	assert.Contains(t, rep.Tail, "--- health of migrate (container "+b.project+"-migrate-1): exited, exit code 3 ---")
	assert.Contains(t, rep.Tail, "one-shot migrate exits with code 3")
	assert.Contains(t, rep.Detail, "restore: restored-healthy "+good[:12])
}

// dbAndAPI is a project whose api waits, through compose's depends_on, for db to be
// healthy; db is ready readyAfter its start.
func dbAndAPI(readyAfter string) string {
	return `services:
  db:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: db
      READY_AFTER: ` + readyAfter + `
` + slowHealthcheck + `  api:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: api
    depends_on:
      db:
        condition: service_healthy
`
}

func dependsOnHealthy(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	b.publish(release{compose: dbAndAPI("1s")})
	require.Equal(t, 0, b.tick())
	assert.Equal(t, map[string]string{"db": "running/healthy", "api": "running/"}, serviceStates(b.LastReport()))
	if be.engine {
		// compose started api only once db had passed a healthcheck.
		var log []struct {
			End      time.Time
			ExitCode int
		}
		require.NoError(t, json.Unmarshal([]byte(b.dockerCLI("inspect", "--format", "{{json .State.Health.Log}}", b.containerID("db"))), &log))
		var firstPass time.Time
		for _, l := range log {
			if l.ExitCode == 0 && (firstPass.IsZero() || l.End.Before(firstPass)) {
				firstPass = l.End
			}
		}
		started, err := time.Parse(time.RFC3339Nano, b.dockerCLI("inspect", "--format", "{{.State.StartedAt}}", b.containerID("api")))
		require.NoError(t, err)
		require.False(t, firstPass.IsZero(), "db passed a healthcheck")
		assert.True(t, !started.Before(firstPass.Add(-time.Second)), "api started at %s, db first passed its healthcheck at %s", started, firstPass)
	}
}

func crashLoop(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{healthTimeout: "60s"})
	b.publish(release{compose: "services:\n" + webService + `  crasher:
    image: {{image}}
    command: ["exit", "4"]
    restart: always
    environment:
      SERVICE: crasher
`, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	b.script(fakedocker.Script{Services: map[string]fakedocker.Service{"crasher": {States: []fakedocker.State{
		{Status: "Up Less than a second"}, {State: "restarting", ExitCode: 4, RestartCount: 2}}}}})
	start := time.Now()
	assert.Equal(t, 1, b.tick())
	took := time.Since(start)
	t.Logf("crash loop detected in %s (health_timeout 60s)", took.Round(time.Millisecond))
	assert.Less(t, took, 30*time.Second, "the crash loop fails fast, long before health_timeout")
	rep := b.LastReport()
	assert.Equal(t, "UNHEALTHY", rep.Code)
	assert.Contains(t, rep.Detail, "crasher: ")
	assert.Contains(t, rep.Detail, "restore: none")
	assert.Contains(t, rep.Tail, "--- health of crasher (container "+b.project+"-crasher-1): ")
	assert.Empty(t, b.Live(), "nothing served before: the failed release is taken down")
	if be.engine {
		assert.Empty(t, b.containers())
	}
}

func downPurge(t *testing.T, be backend, env string, volumesGone bool) {
	b := newBox(t, be, boxOpts{env: env})
	b.publish(release{compose: `services:
  db:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: db
    volumes:
      - data:/data
volumes:
  data: {}
`})
	require.Equal(t, 0, b.tick())
	if be.engine {
		require.Len(t, b.volumes(), 1)
	}
	b.Stack.Tenancy.SetDesired(b.Env, faketenancy.Desired{Action: "down", Purge: true})
	require.Equal(t, 0, b.tick())
	assert.Equal(t, "down", b.LastReport().Result)
	assert.Empty(t, b.Live())
	if be.engine {
		assert.Empty(t, b.containers())
		if volumesGone {
			assert.Empty(t, b.volumes(), "dev purges the volumes")
		} else {
			assert.Len(t, b.volumes(), 1, "prod never purges")
		}
	} else {
		assert.Equal(t, volumesGone, b.DockerStatus().DownVolumes)
	}
}

func killDuringUp(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	// compose up itself waits for db to be healthy before it starts api: a wide window.
	b.publish(release{compose: dbAndAPI("3s")})
	b.script(fakedocker.Script{Commands: map[string]fakedocker.Command{"up": {Delay: 3 * time.Second}}})
	p := b.start("run")
	testprog.WaitFor(t, 60*time.Second, "compose up to be running", func() bool {
		if be.engine {
			return len(b.containers()) > 0
		}
		return b.DockerStatus().Calls["up"] > 0
	})
	require.NoError(t, syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL))
	<-p.Done()
	b.outputs = append(b.outputs, p.Output())
	assert.Empty(t, b.Stack.Tenancy.Reports(b.Env), "killed before it could report")
	require.Equal(t, 1, b.Leases())

	b.script(fakedocker.Script{})
	require.Equal(t, 0, b.tick(), "report: %+v", b.Stack.Tenancy.Reports(b.Env))
	assert.Equal(t, "applied", b.LastReport().Result)
	assert.Equal(t, 1, b.Leases(), "the promoted release converged without a second lease")
	assert.Equal(t, map[string]string{"db": "running/healthy", "api": "running/"}, serviceStates(b.LastReport()))
}

func keepReleases(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{keepReleases: 2})
	var shas []string
	for i := range 3 {
		shas = append(shas, b.publish(release{compose: "services:\n" + webService,
			vars: map[string]string{"LOG_LEVEL": strings.Repeat("v", i+1)}, secret: true}))
		require.Equal(t, 0, b.tick())
	}
	assert.ElementsMatch(t, shas[1:], b.Releases(), "the oldest release was pruned")
	_, err := os.Stat(filepath.Join(b.Dir, "srv", "releases", shas[0]))
	assert.True(t, os.IsNotExist(err))
	assert.Equal(t, shas[2], b.Live())
	if be.engine {
		assert.Equal(t, hashOf("vvv"), b.envHash("web", "LOG_LEVEL"), "the live container runs the newest release")
	}
}
