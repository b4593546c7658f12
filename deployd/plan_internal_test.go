package deployd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/composecheck"
	"github.com/monky/monky-deployd/internal/plan"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

const (
	planSHAA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	planSHAB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// planComposeFile is the golden plan's live compose file, the one internal/plan's
// tests diff against: web mounts a file of the release, worker reads the whole .env.
const planComposeFile = "../internal/plan/testdata/release/compose.yaml"

// planSide loads a release made of files (compose.yaml among them), vars and the
// secret DB_PASSWORD as the agent runs it: in /srv/monky/releases/<sha> (plan.Load).
func planSide(t *testing.T, sha string, files, vars map[string]string) *plan.Side {
	t.Helper()
	dir := t.TempDir()
	m := bundle.Manifest{ComposeFiles: []string{"compose.yaml"}, Vars: vars,
		Secrets: map[string]bundle.SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}}}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		m.Files = append(m.Files, name)
	}
	side, err := plan.Load(context.Background(), plan.Source{SHA: sha, Files: dir,
		Dir: "/srv/monky/releases/" + sha, Manifest: m, Project: "monky"})
	require.NoError(t, err)
	return side
}

// goldenPlan is the plan of a release that changes a var's value and a mounted
// file, renames worker to jobs and adds cache, as the CLI prints it.
func goldenPlan(t *testing.T) Plan {
	live := planSide(t, planSHAA, map[string]string{"compose.yaml": planCompose(t), "config/app.toml": "listen = 1\n"},
		map[string]string{"LOG_LEVEL": "info"})
	next := planSide(t, planSHAB, map[string]string{
		"compose.yaml":    strings.Replace(planCompose(t), "  worker:", "  jobs:", 1) + "  cache:\n    image: redis:7\n",
		"config/app.toml": "listen = 2\n",
	}, map[string]string{"LOG_LEVEL": "debug"})
	p := Plan{EnvID: "env-dev-01", Action: "apply", Live: &PlanRelease{SHA: planSHAA, Serial: 17}, Target: &PlanRelease{SHA: planSHAB, Serial: 18},
		Next: "the next tick applies this (lease, OpenBao, compose up, health); run `monky-deployd run` to apply it now, or wait for the timer"}
	p.diff(live, next)
	p.finish()
	return p
}

func TestPlanGolden(t *testing.T) {
	t.Parallel()
	p := goldenPlan(t)
	golden.Assert(t, "plan/plan.txt", []byte(p.Text()))
	data, err := json.MarshalIndent(p, "", "  ")
	require.NoError(t, err)
	golden.Assert(t, "plan/plan.json", append(data, '\n'))

	refused := Plan{EnvID: "env-dev-01", Action: "apply", Live: &PlanRelease{SHA: planSHAA, Serial: 17}, Target: &PlanRelease{SHA: planSHAB, Serial: 18},
		Refusals: []bundle.Refusal{{Code: codes.Privileged, Detail: "service evil: privileged: true"}},
		Next:     "an apply refuses this bundle before the lease and reports it failed: fix it in the renderer and publish again"}
	refused.finish()
	golden.Assert(t, "plan/refused.txt", []byte(refused.Text()))
}

// TestPlanNoValues: neither the text nor the JSON of a plan carries the value of a
// var or the placeholder of a secret, whatever changed.
func TestPlanNoValues(t *testing.T) {
	p := goldenPlan(t)
	data, err := json.Marshal(p)
	require.NoError(t, err)
	for _, v := range []string{"info", "debug", composecheck.SecretPlaceholder, "listen = "} {
		assert.NotContains(t, p.Text(), v)
		assert.NotContains(t, string(data), v)
	}
}

// planCompose reads planComposeFile.
func planCompose(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(planComposeFile)
	require.NoError(t, err)
	return string(data)
}
