package engine

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// planCompose has three services: web reads LOG_LEVEL, worker reads nothing that
// changes, conf bind-mounts a file of the release that stays the same.
const planCompose = "services:\n" + webService + workerService + `  conf:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: conf
    volumes:
      - ./config/app.conf:/etc/app.conf:ro
`

// publishPlan publishes planCompose with LOG_LEVEL at level and returns its sha.
func (b *box) publishPlan(level string) string {
	return b.publish(release{compose: planCompose, vars: map[string]string{"LOG_LEVEL": level}, secret: true,
		files: map[string]string{"config/app.conf": "listen = 8080\n"}})
}

// TestPlan: apply release 1, plan release 2 (a var's value changes for web; worker
// unchanged; conf's mounted file unchanged but in a new release directory), then
// apply release 2: exactly the services the plan said recreated get new containers
// on the real engine.
func TestPlan(t *testing.T) {
	testprog.SkipIfShort(t)
	for _, be := range []backend{fake, engine} {
		t.Run(be.name, func(t *testing.T) {
			b := newBox(t, be, boxOpts{})
			b.publishPlan("info")
			require.Equal(t, 0, b.tick())
			require.Equal(t, "applied", b.LastReport().Result)
			before := b.containerIDs()
			leases, reports := b.Leases(), len(b.Stack.Tenancy.Reports(b.Env))

			sha := b.publishPlan("debug")
			res := b.start("plan", "--json").Wait(t, 2*time.Minute)
			require.Equal(t, 2, res.Code, res.Stderr)
			var p deployd.Plan
			require.NoError(t, json.Unmarshal([]byte(res.Stdout), &p), res.Stdout)
			assert.Equal(t, sha, p.Target.SHA)
			changes := map[string]string{}
			for _, s := range p.Services {
				changes[s.Name] = s.Change
			}
			assert.Equal(t, map[string]string{"web": "recreated", "worker": "kept", "conf": "recreated"}, changes, res.Stdout)
			assert.Contains(t, res.Stdout, `"names":["LOG_LEVEL"]`)
			assert.Contains(t, res.Stdout, `"kind":"release_dir"`)
			for _, v := range []string{canary, "debug", "info"} {
				assert.NotContains(t, res.Stdout, v)
			}
			assert.Equal(t, leases, b.Leases(), "plan takes no lease")
			assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "plan reports nothing")
			assert.Equal(t, before, b.containerIDs(), "plan changes no container")

			require.Equal(t, 0, b.tick())
			require.Equal(t, sha, b.Live())
			if !be.engine {
				return
			}
			after := b.containerIDs()
			for svc, change := range changes {
				if change == "recreated" {
					assert.NotEqual(t, before[svc], after[svc], "%s: plan said recreated", svc)
				} else {
					assert.Equal(t, before[svc], after[svc], "%s: plan said %s", svc, change)
				}
			}
		})
	}
}

// configsCompose: conf mounts a compose config from a file of the release, worker
// mounts nothing of it.
const configsCompose = "services:\n" + workerService + `  conf:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: conf
    configs:
      - source: app
        target: /etc/app.conf
configs:
  app:
    file: ./app.conf
`

// publishConfigs publishes configsCompose with app.conf holding conf.
func (b *box) publishConfigs(conf string) string {
	return b.publish(release{compose: configsCompose, files: map[string]string{"app.conf": conf}})
}

// configSource is where the engine mounts the service's /etc/app.conf from.
func (b *box) configSource(service string) string {
	return b.dockerCLI("inspect", "--format",
		`{{range .Mounts}}{{if eq .Destination "/etc/app.conf"}}{{.Source}}{{end}}{{end}}`, b.containerID(service))
}

// releaseFile is the path of a file of the staged release of sha.
func (b *box) releaseFile(sha, name string) string {
	return filepath.Join(b.Cfg.DeployDir, "releases", sha, name)
}

// TestConfigsFollowTheRelease: compose hashes a config by name, so without the
// agent's label a new release with another app.conf kept the container, which went on
// mounting the previous release's file (and, once that release was pruned, a file
// that no longer exists). With it, the service that mounts the config is recreated
// and mounts the new release's file; plan says so first; the other service is kept.
func TestConfigsFollowTheRelease(t *testing.T) {
	testprog.SkipIfShort(t)
	for _, be := range []backend{fake, engine} {
		t.Run(be.name, func(t *testing.T) {
			b := newBox(t, be, boxOpts{})
			first := b.publishConfigs("listen = 1\n")
			require.Equal(t, 0, b.tick())
			require.Equal(t, "applied", b.LastReport().Result)
			var before map[string]string
			if be.engine {
				before = b.containerIDs()
				assert.Equal(t, b.releaseFile(first, "app.conf"), b.configSource("conf"))
			}

			sha := b.publishConfigs("listen = 2\n")
			res := b.start("plan", "--json").Wait(t, 2*time.Minute)
			require.Equal(t, 2, res.Code, res.Stderr)
			var p deployd.Plan
			require.NoError(t, json.Unmarshal([]byte(res.Stdout), &p), res.Stdout)
			changes := map[string]string{}
			for _, s := range p.Services {
				changes[s.Name] = s.Change
			}
			assert.Equal(t, map[string]string{"conf": "recreated", "worker": "kept"}, changes, res.Stdout)
			assert.Contains(t, res.Stdout, `"kind":"sources","names":["app.conf"]`)

			require.Equal(t, 0, b.tick())
			require.Equal(t, sha, b.Live())
			if !be.engine {
				return
			}
			after := b.containerIDs()
			assert.NotEqual(t, before["conf"], after["conf"], "conf mounts a config of the release: recreated")
			assert.Equal(t, before["worker"], after["worker"], "worker mounts nothing of it: kept")
			assert.Equal(t, b.releaseFile(sha, "app.conf"), b.configSource("conf"), "the new release's file")
		})
	}
}
