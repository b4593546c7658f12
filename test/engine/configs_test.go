package engine

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
)

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
	b.T.Helper()
	b.serial++
	bn := deploydtest.MakeBundle(b.T, faketenancy.BundleSpec{
		EnvID: b.Env, Serial: b.serial,
		Files: map[string]string{
			"compose.yaml": strings.ReplaceAll(configsCompose, "{{image}}", b.image()),
			"app.conf":     conf,
		},
	})
	sha, _ := b.Stack.PublishBundle(b.Env, bn.Data)
	return sha
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
	testbox.SkipIfShort(t)
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
