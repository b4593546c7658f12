package fakedocker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/compose"
)

// engineScript has a service becoming healthy, a failed one-shot and a sized image.
var engineScript = &Script{
	ServerVersion: "26.1.4",
	Services: map[string]Service{
		"web": {ImageSize: 123456, States: []State{{Health: "starting"}, {Health: "healthy"}}},
		"job": {Image: "busybox", States: []State{{State: "exited", ExitCode: 3}}},
	},
}

// engine asks the engine handler of e and returns the status and body.
func (e *env) engine(method, target string) (int, []byte) {
	e.t.Helper()
	cfg := config{Log: e.log, Script: e.script}
	rec := httptest.NewRecorder()
	newEngine(cfg).ServeHTTP(rec, httptest.NewRequest(method, "http://docker"+target, nil))
	return rec.Code, rec.Body.Bytes()
}

// engineJSON asks the engine, checks the status and decodes the body into v.
func (e *env) engineJSON(method, target string, wantCode int, v any) {
	e.t.Helper()
	code, body := e.engine(method, target)
	require.Equal(e.t, wantCode, code, "%s %s: %s", method, target, body)
	require.NoError(e.t, json.Unmarshal(body, v), "%s %s: %s", method, target, body)
}

// refused asks the engine and checks its error answer: the status and a message holding part.
func (e *env) refused(method, target string, wantCode int, part string, msgAndArgs ...any) {
	e.t.Helper()
	code, body := e.engine(method, target)
	assert.Equal(e.t, wantCode, code, msgAndArgs...)
	message(part)(e.t, body)
}

func projectFilter(p string) string {
	return url.QueryEscape(`{"label":["com.docker.compose.project=` + p + `"]}`)
}

func TestEngineEndpoints(t *testing.T) {
	e := newEnv(t, engineScript)
	e.mustCompose("up", "-d")
	all := "/containers/json?all=1&filters=" + projectFilter("p")

	var list []map[string]any
	e.engineJSON("GET", all, 200, &list)
	byName := map[string]map[string]any{}
	for _, c := range list {
		names := c["Names"].([]any)
		require.Len(t, names, 1)
		byName[names[0].(string)] = c
	}
	require.ElementsMatch(t, []string{"/p-cron-1", "/p-db-1", "/p-job-1", "/p-web-1", "/p-worker-1"}, keys(byName))
	web := byName["/p-web-1"]
	assert.Equal(t, "registry.monky.internal/web:1.4.2", web["Image"], "the compose file's image")
	assert.Equal(t, ImageID("registry.monky.internal/web:1.4.2"), web["ImageID"])
	assert.Equal(t, "running", web["State"])
	assert.Equal(t, "Up 3 seconds (health: starting)", web["Status"])
	assert.Equal(t, map[string]any{"com.docker.compose.project": "p", "com.docker.compose.service": "web"}, web["Labels"])
	assert.Equal(t, "/entrypoint.sh", web["Command"])
	assert.Equal(t, []any{}, web["Ports"])
	assert.Len(t, web["Id"], 64)
	assert.Equal(t, "exited", byName["/p-job-1"]["State"])
	assert.Equal(t, "Exited (3) 2 seconds ago", byName["/p-job-1"]["Status"])
	assert.Equal(t, "busybox", byName["/p-job-1"]["Image"], "the script's image wins")
	assert.Equal(t, "Up 3 seconds", byName["/p-db-1"]["Status"], "the override disabled db's healthcheck")

	// the second list is the second ps step
	e.engineJSON("GET", all, 200, &list)
	for _, c := range list {
		if c["Names"].([]any)[0] == "/p-web-1" {
			assert.Equal(t, "Up 5 seconds (healthy)", c["Status"])
		}
	}
	assert.Equal(t, 2, e.status().PSCalls)

	webID := web["Id"].(string)
	tests := []struct {
		name, method, target string
		code                 int
		want                 func(t *testing.T, body []byte)
	}{
		{"ping", "GET", "/_ping", 200, func(t *testing.T, b []byte) { assert.Equal(t, "OK", string(b)) }},
		{"ping head", "HEAD", "/_ping", 200, nil},
		{"version", "GET", "/version", 200, func(t *testing.T, b []byte) {
			var v map[string]any
			require.NoError(t, json.Unmarshal(b, &v))
			assert.Equal(t, "26.1.4", v["Version"])
			assert.Equal(t, apiVersion, v["ApiVersion"])
			assert.Equal(t, map[string]any{"Name": "Docker Engine - Community (fake)"}, v["Platform"])
			assert.Equal(t, "Engine", v["Components"].([]any)[0].(map[string]any)["Name"], "the Engine API's names of record")
		}},
		{"versioned path", "GET", "/v1.41/version", 200, nil},
		{"running only without all", "GET", "/containers/json?filters=" + projectFilter("p"), 200, func(t *testing.T, b []byte) {
			assert.ElementsMatch(t, []string{"/p-cron-1", "/p-db-1", "/p-web-1", "/p-worker-1"}, names(t, b), "the exited job is hidden")
		}},
		{"all=true", "GET", "/containers/json?all=true&filters=" + projectFilter("p"), 200, func(t *testing.T, b []byte) {
			assert.Len(t, names(t, b), 5)
		}},
		{"another project", "GET", "/containers/json?all=1&filters=" + projectFilter("other"), 200, func(t *testing.T, b []byte) {
			assert.Equal(t, "[]\n", string(b))
		}},
		{"no filter", "GET", "/containers/json?all=1", 200, func(t *testing.T, b []byte) { assert.Len(t, names(t, b), 5) }},
		{"label and service", "GET", "/containers/json?all=1&filters=" + url.QueryEscape(`{"label":["com.docker.compose.project=p","com.docker.compose.service=web"]}`), 200,
			func(t *testing.T, b []byte) { assert.Equal(t, []string{"/p-web-1"}, names(t, b)) }},
		{"label key only, old filter form", "GET", "/containers/json?all=1&filters=" + url.QueryEscape(`{"label":{"com.docker.compose.service":true}}`), 200,
			func(t *testing.T, b []byte) { assert.Len(t, names(t, b), 5) }},
		{"status filter", "GET", "/containers/json?all=1&filters=" + url.QueryEscape(`{"status":["exited"]}`), 200,
			func(t *testing.T, b []byte) { assert.Equal(t, []string{"/p-job-1"}, names(t, b)) }},
		{"unmodelled filter", "GET", "/containers/json?filters=" + url.QueryEscape(`{"ancestor":["x"]}`), 400, message("not modelled")},
		{"broken filter", "GET", "/containers/json?filters=%7B", 400, message("invalid filter")},
		{"inspect by ID", "GET", "/containers/" + webID + "/json", 200, func(t *testing.T, b []byte) {
			var o map[string]any
			require.NoError(t, json.Unmarshal(b, &o))
			assert.Equal(t, "/p-web-1", o["Name"])
			assert.Equal(t, ImageID("registry.monky.internal/web:1.4.2"), o["Image"])
			state := o["State"].(map[string]any)
			assert.Equal(t, "healthy", state["Health"].(map[string]any)["Status"], "the state of the last ps step")
			config, ok := o["Config"].(map[string]any)
			require.True(t, ok, "the engine's key is Config, with a capital C: %s", b)
			assert.Equal(t, "web", config["Labels"].(map[string]any)["com.docker.compose.service"])
		}},
		{"inspect by short ID", "GET", "/containers/" + webID[:12] + "/json", 200, nil},
		{"inspect by name", "GET", "/containers/p-job-1/json", 200, func(t *testing.T, b []byte) {
			var o map[string]any
			require.NoError(t, json.Unmarshal(b, &o))
			assert.Equal(t, 3.0, o["State"].(map[string]any)["ExitCode"])
		}},
		{"inspect unknown", "GET", "/containers/nope/json", 404, message("No such container: nope")},
		{"inspect too short a prefix", "GET", "/containers/" + webID[:6] + "/json", 404, message("No such container")},
		{"unknown path", "GET", "/networks", 404, message("page not found")},
		{"unknown container path", "GET", "/containers/" + webID + "/logs", 404, message("page not found")},
		{"list with POST", "POST", "/containers/json", 405, message("method POST not allowed")},
		{"inspect with DELETE", "DELETE", "/containers/" + webID + "/json", 405, message("not allowed")},
		{"images with POST", "POST", "/images/json", 405, message("not allowed")},
		{"image by GET", "GET", "/images/" + strings.Repeat("a", 64), 405, message("allowed: DELETE")},
		{"image filters", "GET", "/images/json?filters=" + url.QueryEscape(`{"dangling":["true"]}`), 400, message("not modelled")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.engine(tc.method, tc.target)
			require.Equal(t, tc.code, code, "%s", body)
			if tc.want != nil {
				tc.want(t, body)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// names are the first names of a container list.
func names(t *testing.T, body []byte) []string {
	t.Helper()
	var list []struct{ Names []string }
	require.NoError(t, json.Unmarshal(body, &list), "%s", body)
	out := []string{}
	for _, c := range list {
		out = append(out, c.Names[0])
	}
	return out
}

// message checks an error answer of the engine.
func message(part string) func(t *testing.T, b []byte) {
	return func(t *testing.T, b []byte) {
		t.Helper()
		var m map[string]string
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		assert.Len(t, m, 1, "an error is {\"message\": ...} only")
		assert.Contains(t, m["message"], part)
	}
}

// healthFromStatus is the health docker's status text shows: moby's State.String
// writes a running container with a healthcheck as "Up <duration> (<health>)".
// internal/engine's copy, which the agent reads the list with, is not shared on
// purpose: a fake is checked against docker's format with its own code, not with the
// code under test (internal/engine's FuzzStatus pins the agent's reading).
func healthFromStatus(status string) string {
	for suffix, health := range map[string]string{" (healthy)": "healthy", " (unhealthy)": "unhealthy", " (health: starting)": "starting"} {
		if strings.HasSuffix(status, suffix) {
			return health
		}
	}
	return ""
}

// TestEngineAgreesWithTheCLI: a script plays the same whichever way it is read: at the
// n-th ps step docker compose ps (parsed by compose.ParsePS), GET /containers/json
// (parsed by the same ParsePS) and GET /containers/{id}/json show the same containers
// with the same State, Status, Health and ExitCode; a mix of both reads advances one
// counter; inspect advances none.
func TestEngineAgreesWithTheCLI(t *testing.T) {
	script := &Script{Services: map[string]Service{
		"web":     {States: []State{{Health: "starting", Times: 2}, {Health: "unhealthy"}, {State: "restarting", ExitCode: 2}, {Health: "healthy"}}},
		"worker":  {States: []State{{State: "restarting", ExitCode: 137}, {}}},
		"migrate": {States: []State{{}, {State: "exited", ExitCode: 3}}},
		"cron":    {States: []State{{State: "created"}, {State: "paused"}}},
	}}
	dir := release(t, "agree", "services:\n  web:\n    image: nginx:1.27\n    healthcheck:\n      test: [CMD, true]\n  worker:\n    build: .\n")
	viaCLI := func(e *env) []compose.Container {
		out, _ := e.mustRun("compose", "--project-name", "p", "--project-directory", dir, "ps", "--all", "--format", "json")
		cs, err := compose.ParsePS([]byte(out))
		require.NoError(t, err)
		return cs
	}
	viaAPI := func(e *env) []compose.Container {
		code, body := e.engine("GET", "/containers/json?all=1&filters="+projectFilter("p"))
		require.Equal(t, 200, code, "%s", body)
		cs, err := compose.ParsePS(body)
		require.NoError(t, err, "the API list reads as ps output")
		return cs
	}
	agree := func(step int, api *env, want, got []compose.Container) {
		t.Helper()
		require.Len(t, want, 4, "step %d", step)
		require.Len(t, got, len(want), "step %d", step)
		for i, w := range want {
			g, at := got[i], fmt.Sprintf("step %d %s", step, w.Service)
			assert.True(t, strings.HasPrefix(g.ID, w.ID), "%s: the API's full ID %s starts with ps's %s", at, g.ID, w.ID)
			assert.Equal(t, []string{w.Name, w.Service, w.Image, w.Command, w.State, w.Status}, []string{g.Name, g.Service, g.Image, g.Command, g.State, g.Status}, at)
			assert.Equal(t, w.Health, healthFromStatus(g.Status), "%s: health in the status text", at)
			if w.State == "exited" {
				assert.Equal(t, w.ExitCode, g.ExitCode, "%s: exit code in the status text", at)
			}
			var ins struct {
				Name, Image string
				State       struct {
					Status   string
					ExitCode int
					Health   *struct{ Status string }
				}
			}
			api.engineJSON("GET", "/containers/"+g.ID+"/json", 200, &ins)
			assert.Equal(t, []any{"/" + w.Name, ImageID(w.Image), w.State, w.ExitCode}, []any{ins.Name, ins.Image, ins.State.Status, ins.State.ExitCode}, "%s: inspect", at)
			if w.Health != "" {
				require.NotNil(t, ins.State.Health, at)
				assert.Equal(t, w.Health, ins.State.Health.Status, "%s: inspect", at)
			}
		}
	}
	cli, api, mixed := newEnv(t, script), newEnv(t, script), newEnv(t, script)
	for _, e := range []*env{cli, api, mixed} {
		e.composeIn(dir, "up", "-d")
	}
	for n := range 6 {
		want := viaCLI(cli)
		agree(n, api, want, viaAPI(api))
		if n%2 == 0 {
			agree(n, mixed, want, viaAPI(mixed))
		} else {
			assert.Equal(t, want, viaCLI(mixed), "step %d, mixed, through ps", n)
		}
		if n == 3 {
			assert.Equal(t, []string{"restarting", "Restarting (2) 1 second ago"}, []string{want[2].State, want[2].Status}, "the script did advance: %s", want[2].Service)
		}
	}
	for _, e := range []*env{cli, api, mixed} {
		assert.Equal(t, 6, e.status().PSCalls)
	}
	calls, err := readCalls(api.log)
	require.NoError(t, err)
	lists := 0
	for _, c := range calls {
		if c.EngineCommand() == "ps" {
			lists++
		}
	}
	assert.Equal(t, 6, lists, "one recorded call per list")

	// inspect, through either, shows the last step and advances nothing
	var o map[string]any
	api.engineJSON("GET", "/containers/p-web-1/json", 200, &o)
	out, _ := api.mustRun("inspect", "--type", "container", "p-web-1")
	var cliObjs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &cliObjs))
	require.Len(t, cliObjs, 1)
	assert.Equal(t, cliObjs[0], o, "GET /containers/{id}/json is docker inspect's object")
	assert.Equal(t, "healthy", o["State"].(map[string]any)["Health"].(map[string]any)["Status"])
	assert.Equal(t, 6, api.status().PSCalls)

	// up starts the script again, for both
	api.composeIn(dir, "up", "-d")
	assert.Equal(t, "Up 3 seconds (health: starting)", viaAPI(api)[2].Status)
}

// TestEngineRecord: every request is one Call, argv ["engine", METHOD, PATH], the
// query apart; with nothing up the lists are empty arrays; without a log or state the
// engine still answers, and records nothing.
func TestEngineRecord(t *testing.T) {
	e := newEnv(t, nil)
	for _, target := range []string{"/containers/json?all=1", "/images/json"} {
		code, body := e.engine("GET", target)
		require.Equal(t, 200, code)
		assert.Equal(t, "[]\n", string(body), "%s before the first up", target)
	}
	e.engine("POST", "/v1.41/containers/json")
	calls, err := readCalls(e.log)
	require.NoError(t, err)
	require.Len(t, calls, 3)
	assert.Equal(t, []string{"engine", "GET", "/containers/json"}, calls[0].Argv)
	assert.Equal(t, "all=1", calls[0].Query)
	assert.Empty(t, calls[0].Env)
	assert.Equal(t, []string{"engine", "GET", "/images/json"}, calls[1].Argv)
	assert.Empty(t, calls[1].Query)
	assert.Equal(t, []string{"engine", "POST", "/v1.41/containers/json"}, calls[2].Argv, "a refused request is recorded too, as sent")

	// with neither log nor state the engine keeps nothing and sees no project
	rec := httptest.NewRecorder()
	newEngine(config{}).ServeHTTP(rec, httptest.NewRequest("GET", "/containers/json?all=1", nil))
	assert.Equal(t, 200, rec.Code)
	assert.Equal(t, "[]\n", rec.Body.String())
	assert.Equal(t, apiVersion, rec.Header().Get("Api-Version"))
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
}

// composeIn runs docker compose up/down of project p in a release directory holding
// compose.yaml.
func (e *env) composeIn(dir string, args ...string) {
	e.t.Helper()
	e.mustRun(append([]string{"compose", "--project-name", "p", "--project-directory", dir}, args...)...)
}

func release(t *testing.T, name, compose string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(compose), 0o644))
	return dir
}

type imageItem struct {
	ID       string `json:"Id"`
	RepoTags []string
	Size     int64
	Created  int64
}

func (e *env) images() map[string]imageItem {
	e.t.Helper()
	var list []imageItem
	e.engineJSON("GET", "/images/json", 200, &list)
	out := map[string]imageItem{}
	for _, im := range list {
		require.Len(e.t, im.RepoTags, 1)
		out[im.RepoTags[0]] = im
	}
	return out
}

// TestEngineImages: images are learned from up, persist after down and after an up of
// another release, and go only by DELETE /images/{id}, which refuses an image in use.
func TestEngineImages(t *testing.T) {
	e := newEnv(t, &Script{
		Services: map[string]Service{"api": {ImageSize: 42}},
		Releases: map[string]map[string]Service{"rel2": {"once": {States: []State{{State: "exited"}}}}},
	})
	rel1 := release(t, "rel1", "services:\n  api:\n    image: registry.example/api:1\n  web:\n    build: .\n")
	rel2 := release(t, "rel2", "services:\n  api:\n    image: registry.example/api:2\n  once:\n    image: alpine\n")

	e.composeIn(rel1, "up", "-d")
	got := e.images()
	require.ElementsMatch(t, []string{"registry.example/api:1", "p-web:latest"}, keys(got), "the named image and the built one")
	api1 := got["registry.example/api:1"]
	assert.Equal(t, ImageID("registry.example/api:1"), api1.ID)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, api1.ID)
	assert.Equal(t, int64(42), api1.Size, "the script's size")
	assert.Equal(t, defaultImageSize, got["p-web:latest"].Size)
	assert.Equal(t, ImageID("p-web"), got["p-web:latest"].ID, "an untagged reference is :latest")

	var list []map[string]any
	e.engineJSON("GET", "/containers/json?all=1", 200, &list)
	for _, c := range list {
		if c["Names"].([]any)[0] == "/p-web-1" {
			assert.Equal(t, "p-web", c["Image"])
			assert.Equal(t, got["p-web:latest"].ID, c["ImageID"])
		}
	}

	e.refused("DELETE", "/images/"+api1.ID, 409, "(cannot be forced) - image is being used by running container")
	code, _ := e.engine("DELETE", "/images/"+api1.ID+"?force=1")
	assert.Equal(t, 409, code, "a running container's image cannot be forced")

	e.composeIn(rel2, "up", "-d")
	got = e.images()
	require.ElementsMatch(t, []string{"registry.example/api:1", "p-web:latest", "registry.example/api:2", "alpine:latest"}, keys(got),
		"the images of the release before stay")

	var del []map[string]string
	e.engineJSON("DELETE", "/images/"+api1.ID, 200, &del)
	assert.Equal(t, []map[string]string{{"Untagged": "registry.example/api:1"}, {"Deleted": api1.ID}}, del)
	e.refused("DELETE", "/images/"+api1.ID, 404, "No such image: "+api1.ID)
	e.engineJSON("DELETE", "/images/"+strings.TrimPrefix(got["p-web:latest"].ID, "sha256:")[:12], 200, &del) // a short ID
	e.refused("DELETE", "/images/alpine:latest", 400, "by ID")

	alpine := got["alpine:latest"].ID
	e.refused("DELETE", "/images/"+alpine, 409, "(must be forced) - image is being used by stopped container", "a stopped container still holds its image")
	e.engineJSON("DELETE", "/images/"+alpine+"?force=1", 200, &del)

	e.composeIn(rel2, "down")
	got = e.images()
	require.Equal(t, []string{"registry.example/api:2"}, keys(got), "down removes containers, not images")
	e.engineJSON("DELETE", "/images/"+got["registry.example/api:2"].ID, 200, &del)
	assert.Empty(t, e.images())
	assert.Empty(t, e.status().Images)
}

// TestEngineOldStateFile: a state file written before images were modelled still
// reads: its containers show the default image, and no image is held. A script file
// that does not read is a 500 with its error.
func TestEngineOldStateFile(t *testing.T) {
	e := newEnv(t, nil)
	require.NoError(t, os.WriteFile(e.log+".state",
		[]byte(`{"up":true,"project":"p","services":["web"],"generation":1,"ps_calls":0,"down_volumes":false,"up_at":1700000000}`), 0o644))
	var list []map[string]any
	e.engineJSON("GET", "/containers/json?all=1", 200, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "example.invalid/web:latest", list[0]["Image"])
	assert.Empty(t, e.images())
	assert.Equal(t, 1, e.status().PSCalls)

	// a script that does not read is a 500 with its error
	e.script = filepath.Join(e.dir, "script.json")
	require.NoError(t, os.WriteFile(e.script, []byte(`{"servics":{}}`), 0o644))
	e.refused("GET", "/containers/json", 500, `unknown field "servics"`)
}

// TestEnginePlaysTheScriptedCommands: a scripted failure or delay of ps, inspect or
// version applies to the engine API reads too, and counts the same calls as the CLI.
func TestEnginePlaysTheScriptedCommands(t *testing.T) {
	script := &Script{Commands: map[string]Command{
		"ps":      {Exit: 1, FailTimes: 2, Stderr: "Cannot connect to the Docker daemon"},
		"version": {Exit: 1, Stderr: "Error response from daemon: dial unix docker.sock"},
		"inspect": {Delay: 50 * time.Millisecond},
	}}
	e := newEnv(t, script)
	e.mustCompose("up", "-d")

	e.refused("GET", "/containers/json?all=1", http.StatusInternalServerError, "Cannot connect to the Docker daemon")
	code, _, stderr := e.compose("ps", "--all", "--format", "json")
	assert.Equal(t, 1, code, "the second ps call fails too, through the CLI: %s", stderr)
	status, body := e.engine("GET", "/containers/json?all=1")
	assert.Equal(t, http.StatusOK, status, "%s", body)
	e.refused("GET", "/version", http.StatusInternalServerError, "dial unix docker.sock")

	var list []struct{ ID string }
	e.engineJSON("GET", "/containers/json?all=1", http.StatusOK, &list)
	require.NotEmpty(t, list)
	start := time.Now()
	status, _ = e.engine("GET", "/containers/"+list[0].ID+"/json")
	assert.Equal(t, http.StatusOK, status)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "the scripted delay of inspect")
}

// TestEngineRestartStartsTheUptimeOver: a restart count that rises (scripted, or a new
// script) starts the container again, as docker does: its uptime counts from then in
// real time, so that an agent that reads uptimes cannot take a restarted container
// for an old one. Without a restart the fast uptime clock goes on; up starts it over.
func TestEngineRestartStartsTheUptimeOver(t *testing.T) {
	e := newEnv(t, &Script{Services: map[string]Service{
		"web": {States: []State{{Times: 2}, {RestartCount: 1}}},
	}})
	e.mustCompose("up", "-d")
	status := func() string {
		var list []struct {
			Labels map[string]string
			Status string
		}
		e.engineJSON("GET", "/containers/json?all=1&filters="+projectFilter("p"), 200, &list)
		for _, c := range list {
			if c.Labels["com.docker.compose.service"] == "web" {
				return strings.TrimSuffix(c.Status, " (healthy)")
			}
		}
		t.Fatal("no web container")
		return ""
	}
	assert.Equal(t, "Up 3 seconds", status())
	assert.Equal(t, "Up 5 seconds", status())
	assert.Equal(t, "Up Less than a second", status(), "restarted: RestartCount 0 → 1")
	assert.Equal(t, "Up Less than a second", status(), "no further restart; under a second of real time")
	require.NoError(t, (&Script{Services: map[string]Service{"web": {States: []State{{RestartCount: 3}}}}}).writeFile(e.script))
	assert.Equal(t, "Up Less than a second", status(), "a new script with a higher count: restarted again")
	assert.Equal(t, 3, e.status().Starts["web"].RestartCount)
	e.mustCompose("up", "-d")
	assert.Equal(t, "Up 3 seconds", status(), "up starts the fast clock over")
}
