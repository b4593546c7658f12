package engine

import (
	"encoding/json"
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
	b.T.Helper()
	b.serial++
	bn := deploydtest.MakeBundle(b.T, faketenancy.BundleSpec{
		EnvID: b.Env, Serial: b.serial,
		Files: map[string]string{
			"compose.yaml":    strings.ReplaceAll(planCompose, "{{image}}", b.image()),
			"config/app.conf": "listen = 8080\n",
		},
		Vars:    map[string]string{"LOG_LEVEL": level},
		Secrets: map[string]faketenancy.SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}},
	})
	sha, _ := b.Stack.PublishBundle(b.Env, bn.Data)
	return sha
}

// TestPlan: apply release 1, plan release 2 (a var's value changes for web; worker
// unchanged; conf's mounted file unchanged but in a new release directory), then
// apply release 2: exactly the services the plan said recreated get new containers
// on the real engine.
func TestPlan(t *testing.T) {
	testbox.SkipIfShort(t)
	for _, be := range []backend{fake, engine} {
		t.Run(be.name, func(t *testing.T) {
			b := newBox(t, be, boxOpts{})
			b.publishPlan("info")
			require.Equal(t, 0, b.tick())
			require.Equal(t, "applied", b.LastReport().Result)
			before := b.containerIDs()
			leases, reports := b.Leases(), len(b.Stack.Reports(b.Env))

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
			assert.Len(t, b.Stack.Reports(b.Env), reports, "plan reports nothing")
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
