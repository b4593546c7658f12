package fakedocker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// get asks d's fake engine over its socket and returns the body; it fails the test on
// another status than 200.
func get(t *testing.T, d *fakedocker.Docker, target string) []byte {
	t.Helper()
	resp, err := d.HTTPClient().Get("http://docker" + target)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", target, body)
	return body
}

// healthFromStatus is the health docker's status text shows: moby's State.String
// writes a running container with a healthcheck as "Up <duration> (<health>)", where
// Health.String gives "health: starting", "healthy" or "unhealthy".
//
// internal/engine's healthFromStatus, which the agent reads the engine's list with,
// says the same; this copy is kept on purpose, not shared. The test checks the fake
// against docker's format, and with the agent's reading a fake and an agent that had
// drifted from docker together would still agree here: a fake is checked with its own
// code, not with the code under test. internal/engine's FuzzStatus pins the agent's
// reading on its own.
func healthFromStatus(status string) string {
	switch {
	case strings.HasSuffix(status, " (healthy)"):
		return "healthy"
	case strings.HasSuffix(status, " (unhealthy)"):
		return "unhealthy"
	case strings.HasSuffix(status, " (health: starting)"):
		return "starting"
	}
	return ""
}

// TestEngineAgreesWithTheCLI plays one script on two installed fakes, one read through
// the fake docker program (docker compose ps, parsed by compose.ParsePS) and one
// through the fake engine's socket (GET /containers/json, parsed by the same ParsePS,
// and GET /containers/{id}/json): at every step both show the same containers with the
// same State, Status, Health and ExitCode.
func TestEngineAgreesWithTheCLI(t *testing.T) {
	script := &fakedocker.Script{Services: map[string]fakedocker.Service{
		"web":     {States: []fakedocker.State{{Health: "starting"}, {Health: "unhealthy"}, {Health: "healthy"}}},
		"worker":  {States: []fakedocker.State{{State: "restarting", ExitCode: 137}, {}}},
		"migrate": {States: []fakedocker.State{{}, {State: "exited", ExitCode: 3}}},
		"cron":    {States: []fakedocker.State{{State: "created"}, {State: "paused"}}},
	}}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "compose.yaml"),
		[]byte("services:\n  web:\n    image: nginx:1.27\n    healthcheck:\n      test: [CMD, true]\n  worker:\n    build: .\n"), 0o644))
	cli, api := deploydtest.NewDocker(t, &fakedocker.Options{Script: script}), deploydtest.NewDocker(t, &fakedocker.Options{Script: script})
	docker := func(d *fakedocker.Docker, args ...string) []byte {
		cmd := exec.Command(d.Path, append([]string{"compose", "-p", "agree", "--project-directory", dir}, args...)...)
		cmd.Env = d.Env()
		out, err := cmd.Output()
		require.NoError(t, err, "docker compose %s", strings.Join(args, " "))
		return out
	}
	docker(cli, "up", "-d")
	docker(api, "up", "-d")
	list := "/containers/json?all=1&filters=" + url.QueryEscape(`{"label":["com.docker.compose.project=agree"]}`)
	for step := range 4 {
		want, err := compose.ParsePS(docker(cli, "ps", "--all", "--format", "json"))
		require.NoError(t, err)
		got, err := compose.ParsePS(get(t, api, list))
		require.NoError(t, err, "the API list reads as ps output")
		require.Len(t, want, 4, "step %d", step)
		require.Len(t, got, len(want), "step %d", step)
		for i, w := range want {
			g := got[i]
			assert.True(t, strings.HasPrefix(g.ID, w.ID), "step %d: the API's full ID %s starts with ps's %s", step, g.ID, w.ID)
			assert.Equal(t, w.Name, g.Name, "step %d", step)
			assert.Equal(t, w.Service, g.Service, "step %d", step)
			assert.Equal(t, w.Image, g.Image, "step %d", step)
			assert.Equal(t, w.Command, g.Command, "step %d", step)
			assert.Equal(t, w.State, g.State, "step %d %s", step, w.Service)
			assert.Equal(t, w.Status, g.Status, "step %d %s", step, w.Service)
			assert.Equal(t, w.Health, healthFromStatus(g.Status), "step %d %s: health in the status text", step, w.Service)
			if w.State == "exited" {
				assert.Equal(t, w.ExitCode, g.ExitCode, "step %d %s: exit code in the status text", step, w.Service)
			}
			var ins struct {
				Name  string
				Image string
				State struct {
					Status   string
					ExitCode int
					Health   *struct{ Status string }
				}
			}
			require.NoError(t, json.Unmarshal(get(t, api, "/containers/"+g.ID+"/json"), &ins))
			assert.Equal(t, "/"+w.Name, ins.Name)
			assert.Equal(t, fakedocker.ImageID(w.Image), ins.Image)
			assert.Equal(t, w.State, ins.State.Status, "step %d %s: inspect", step, w.Service)
			assert.Equal(t, w.ExitCode, ins.State.ExitCode, "step %d %s: inspect", step, w.Service)
			if w.Health != "" {
				require.NotNil(t, ins.State.Health, "step %d %s", step, w.Service)
				assert.Equal(t, w.Health, ins.State.Health.Status, "step %d %s: inspect", step, w.Service)
			}
		}
	}
	cliStatus, err := cli.Status()
	require.NoError(t, err)
	apiStatus, err := api.Status()
	require.NoError(t, err)
	assert.Equal(t, cliStatus.Reads, apiStatus.Reads)
	calls, err := api.Calls()
	require.NoError(t, err)
	var n int
	for _, c := range calls {
		if len(c.Argv) == 3 && c.Argv[0] == fakedocker.EngineArgv0 && c.Argv[2] == "/containers/json" {
			n++
		}
	}
	assert.Equal(t, 4, n, "one recorded call per list")
}
