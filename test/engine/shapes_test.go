package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
	"github.com/monky/monky-deployd/internal/testbox"
)

// TestFakeSpeaksLikeTheEngine runs the same project on the engine and on the fake
// docker and compares what the agent reads: the keys of `docker compose ps --all
// --format json` (compose 2.21+ shape) with the JSON kind of each value, and, of
// `docker inspect`, the keys the agent reads (State, its Health and Log entries,
// Config.Labels, RestartCount). A key the fake lacks or prints with another kind is a
// difference to fix in the fake.
func TestFakeSpeaksLikeTheEngine(t *testing.T) {
	needBackend(t, engine)
	dir := t.TempDir()
	project := "monky-e2e-shapes-" + randomHex(4)
	compose := strings.ReplaceAll(`services:
  web:
    image: {{image}}
    command: ["serve"]
    environment: {SERVICE: web, HEALTHY: "0"}
`+healthcheck+`  job:
    image: {{image}}
    command: ["exit", "0"]
`, "{{image}}", built.image)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(compose), 0o644))
	t.Cleanup(func() { removeProject(t, project) })

	real := func(args ...string) []byte {
		cmd := exec.Command("docker", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		require.NoError(t, err, "docker %s", strings.Join(args, " "))
		return out
	}
	real("compose", "-p", project, "up", "-d")
	testbox.WaitFor(t, 30*time.Second, "web to be unhealthy", func() bool {
		return strings.Contains(string(real("compose", "-p", project, "ps", "--all", "--format", "json")), `"Health":"unhealthy"`)
	})
	realPS := real("compose", "-p", project, "ps", "--all", "--format", "json")
	var ids []string
	for _, line := range bytes.Split(bytes.TrimSpace(realPS), []byte("\n")) {
		var o map[string]any
		require.NoError(t, json.Unmarshal(line, &o))
		ids = append(ids, o["ID"].(string))
	}
	realInspect := real(append([]string{"inspect", "--type", "container"}, ids...)...)

	d := fakedockertest.Install(t, &fakedockertest.Script{Services: map[string]fakedocker.Service{
		"web": {States: []fakedocker.State{{Health: "unhealthy"}}},
		"job": {States: []fakedocker.State{{State: "exited"}}},
	}})
	fakeRun := func(args ...string) []byte {
		cmd := exec.Command(d.Path, args...)
		cmd.Dir = dir
		cmd.Env = d.Env()
		out, err := cmd.Output()
		require.NoError(t, err, "fake docker %s", strings.Join(args, " "))
		return out
	}
	fakeRun("compose", "-p", project, "--project-directory", dir, "up", "-d")
	fakePS := fakeRun("compose", "-p", project, "--project-directory", dir, "ps", "--all", "--format", "json")
	var fakeIDs []string
	for _, line := range bytes.Split(bytes.TrimSpace(fakePS), []byte("\n")) {
		var o map[string]any
		require.NoError(t, json.Unmarshal(line, &o))
		fakeIDs = append(fakeIDs, o["ID"].(string))
	}
	fakeInspect := fakeRun(append([]string{"inspect", "--type", "container"}, fakeIDs...)...)

	t.Run("ps", func(t *testing.T) {
		want := lineShapes(t, realPS)
		require.Subset(t, want, []string{"ID:string", "Service:string", "State:string", "Health:string", "ExitCode:number", "Status:string"})
		assert.Equal(t, want, lineShapes(t, fakePS))
	})
	t.Run("inspect", func(t *testing.T) {
		want := inspectShapes(t, realInspect)
		require.Subset(t, want, []string{"State.Status:string", "State.ExitCode:number", "State.Health.Status:string",
			"State.Health.Log[].Output:string", "State.Health.Log[].ExitCode:number", "RestartCount:number", "Config.Labels:object"})
		got := inspectShapes(t, fakeInspect)
		assert.Equal(t, want, got)
	})
}

// lineShapes is the set of "key:kind" of every object of ps's one-object-per-line output.
func lineShapes(t *testing.T, out []byte) []string {
	set := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var o map[string]any
		require.NoError(t, json.Unmarshal(line, &o))
		for k, v := range o {
			set[k+":"+kind(v)] = true
		}
	}
	return sorted(set)
}

// inspectShapes is the set of "path:kind" of what the agent reads of docker inspect.
func inspectShapes(t *testing.T, out []byte) []string {
	var list []map[string]any
	require.NoError(t, json.Unmarshal(out, &list))
	set := map[string]bool{}
	for _, o := range list {
		set["Id:"+kind(o["Id"])] = true
		set["Name:"+kind(o["Name"])] = true
		set["RestartCount:"+kind(o["RestartCount"])] = true
		cfg, _ := o["Config"].(map[string]any)
		set["Config.Labels:"+kind(cfg["Labels"])] = true
		state, _ := o["State"].(map[string]any)
		for k, v := range state {
			set["State."+k+":"+kind(v)] = true
		}
		if h, ok := state["Health"].(map[string]any); ok {
			for k, v := range h {
				set["State.Health."+k+":"+kind(v)] = true
			}
			logs, _ := h["Log"].([]any)
			for _, l := range logs {
				for k, v := range l.(map[string]any) {
					set["State.Health.Log[]."+k+":"+kind(v)] = true
				}
			}
		}
	}
	return sorted(set)
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func sorted(set map[string]bool) []string {
	var out []string
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
