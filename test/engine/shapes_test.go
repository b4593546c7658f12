package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/internal/testbox/jsontest"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// shapesProject writes the project the shape comparisons run, web (unhealthy by its
// healthcheck) and a job that exits 0, into a fresh directory, names it prefix and a
// random suffix, and removes it from the engine when the test ends.
func shapesProject(t *testing.T, prefix string) (dir, project string) {
	t.Helper()
	dir = t.TempDir()
	project = prefix + randomHex(4)
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
	return dir, project
}

// TestFakeSpeaksLikeTheEngine runs the same project on the engine and on the fake
// docker and compares what the agent reads: the keys of `docker compose ps --all
// --format json` (compose 2.21+ shape) with the JSON kind of each value, and, of
// `docker inspect`, the keys the agent reads (State, its Health and Log entries,
// Config.Labels, RestartCount). A key the fake lacks or prints with another kind is a
// difference to fix in the fake.
func TestFakeSpeaksLikeTheEngine(t *testing.T) {
	needBackend(t, engine)
	dir, project := shapesProject(t, "monky-e2e-shapes-")

	real := func(args ...string) []byte {
		cmd := exec.Command("docker", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		require.NoError(t, err, "docker %s", strings.Join(args, " "))
		return out
	}
	real("compose", "-p", project, "up", "-d")
	testprog.WaitFor(t, 30*time.Second, "web to be unhealthy", func() bool {
		return strings.Contains(string(real("compose", "-p", project, "ps", "--all", "--format", "json")), `"Health":"unhealthy"`)
	})
	realPS := real("compose", "-p", project, "ps", "--all", "--format", "json")
	realInspect := real(append([]string{"inspect", "--type", "container"}, psIDs(t, realPS)...)...)

	d := deploydtest.NewDocker(t, &fakedocker.Options{Script: &fakedocker.Script{Services: map[string]fakedocker.Service{
		"web": {States: []fakedocker.State{{Health: "unhealthy"}}},
		"job": {States: []fakedocker.State{{State: "exited"}}},
	}}})
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
	fakeInspect := fakeRun(append([]string{"inspect", "--type", "container"}, psIDs(t, fakePS)...)...)

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

// psObjects decodes ps's one-object-per-line output.
func psObjects(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var o map[string]any
		require.NoError(t, json.Unmarshal(line, &o))
		objs = append(objs, o)
	}
	return objs
}

// psIDs is the container ID of every object of ps's output, for docker inspect.
func psIDs(t *testing.T, out []byte) []string {
	t.Helper()
	var ids []string
	for _, o := range psObjects(t, out) {
		id, ok := o["ID"].(string)
		require.True(t, ok, "ps gave an object without a string ID: %v", o)
		ids = append(ids, id)
	}
	return ids
}

// lineShapes is the set of "key:kind" of every object of ps's one-object-per-line output.
func lineShapes(t *testing.T, out []byte) []string {
	set := map[string]bool{}
	for _, o := range psObjects(t, out) {
		for k, v := range o {
			set[k+":"+jsontest.Kind(v)] = true
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
		set["Id:"+jsontest.Kind(o["Id"])] = true
		set["Name:"+jsontest.Kind(o["Name"])] = true
		set["RestartCount:"+jsontest.Kind(o["RestartCount"])] = true
		cfg, _ := o["Config"].(map[string]any)
		set["Config.Labels:"+jsontest.Kind(cfg["Labels"])] = true
		state, _ := o["State"].(map[string]any)
		for k, v := range state {
			set["State."+k+":"+jsontest.Kind(v)] = true
		}
		if h, ok := state["Health"].(map[string]any); ok {
			for k, v := range h {
				set["State.Health."+k+":"+jsontest.Kind(v)] = true
			}
			logs, _ := h["Log"].([]any)
			for _, l := range logs {
				for k, v := range l.(map[string]any) {
					set["State.Health.Log[]."+k+":"+jsontest.Kind(v)] = true
				}
			}
		}
	}
	return sorted(set)
}

func sorted(set map[string]bool) []string {
	return slices.Sorted(maps.Keys(set))
}

// notModelled are the fields the real Engine API sends that the fake engine leaves out,
// each with the reason the agent can do without it. A path names the field and
// everything under it. TestFakeEngineSpeaksLikeTheEngine fails when the real engine no
// longer sends one of them, so that the list stays true.
var notModelled = map[string]map[string]string{
	"containers/json": {
		"NetworkSettings": "the fake models no network (docs/FAKES.md); the agent reads none",
	},
	"containers/{id}/json": {
		"ResolvConfPath":      "a file of the engine's data root; the fake has none and the agent reads none",
		"HostnamePath":        "a file of the engine's data root; the fake has none and the agent reads none",
		"HostsPath":           "a file of the engine's data root; the fake has none and the agent reads none",
		"LogPath":             "a file of the engine's data root; the agent reads logs through compose",
		"MountLabel":          "SELinux label; not read",
		"ProcessLabel":        "SELinux label; not read",
		"AppArmorProfile":     "security profile; the agent checks a bundle's security options before compose, never on the engine",
		"ExecIDs":             "the fake runs no exec",
		"HostConfig":          "resources, security options and restart policy: the agent checks them in the bundle before compose, never on the engine",
		"GraphDriver":         "storage driver internals; not read",
		"NetworkSettings":     "the fake models no network; the agent reads none",
		"Config.Hostname":     "not read",
		"Config.Domainname":   "not read",
		"Config.User":         "not read",
		"Config.AttachStdin":  "attach flags; the agent never attaches",
		"Config.AttachStdout": "attach flags; the agent never attaches",
		"Config.AttachStderr": "attach flags; the agent never attaches",
		"Config.Tty":          "attach flags; the agent never attaches",
		"Config.OpenStdin":    "attach flags; the agent never attaches",
		"Config.StdinOnce":    "attach flags; the agent never attaches",
		"Config.Env":          "the environment holds the release's secrets: the fake does not know it and the agent never reads it back",
		"Config.Healthcheck":  "health is scripted in the fake, not run; the agent reads the result in State.Health",
		"Config.Volumes":      "the fake models no volume contents; not read",
		"Config.WorkingDir":   "not read",
		"Config.OnBuild":      "not read",
	},
	"images/json": {},
}

// dataMaps are objects keyed by data (label names, network names, ports): their shape
// is "object", whatever they hold.
var dataMaps = []string{"Labels", "Config.Labels", "NetworkSettings.Networks", "NetworkSettings.Ports",
	"HostConfig.PortBindings", "Config.ExposedPorts", "Config.Volumes", "GraphDriver.Data", "HostConfig.LogConfig.Config"}

// shapes adds the "path:kind" of v and everything under it to set; the elements of an
// array of objects are under "path[]".
func shapes(set map[string]bool, path string, v any) {
	set[path+":"+jsontest.Kind(v)] = true
	if slices.Contains(dataMaps, path) {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := k
			if path != "" {
				p = path + "." + k
			}
			shapes(set, p, e)
		}
	case []any:
		for _, e := range v {
			if _, ok := e.(map[string]any); ok {
				for k, f := range e.(map[string]any) {
					shapes(set, path+"[]."+k, f)
				}
			}
		}
	}
}

// objectShapes is the sorted set of shapes of the top-level objects.
func objectShapes(objs []map[string]any) []string {
	set := map[string]bool{}
	for _, o := range objs {
		for k, v := range o {
			shapes(set, k, v)
		}
	}
	return sorted(set)
}

// withoutNotModelled drops the shapes under the paths of skip and returns the paths of
// skip that matched nothing.
func withoutNotModelled(all []string, skip map[string]string) (kept, unmatched []string) {
	used := map[string]bool{}
	for _, s := range all {
		path, _, _ := strings.Cut(s, ":")
		dropped := false
		for p := range skip {
			if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[]") {
				used[p], dropped = true, true
			}
		}
		if !dropped {
			kept = append(kept, s)
		}
	}
	for p := range skip {
		if !used[p] {
			unmatched = append(unmatched, p)
		}
	}
	slices.Sort(unmatched)
	return kept, unmatched
}

// apiGet asks an Engine API through client and decodes the 200 answer into v.
func apiGet(t *testing.T, client *http.Client, target string, v any) {
	t.Helper()
	resp, err := client.Get("http://docker" + target)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", target, body)
	require.NoError(t, json.Unmarshal(body, v), "GET %s", target)
}

// unixClient is an HTTP client whose every request goes to the unix socket.
func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
}

// engineSocket is the real engine's socket: DOCKER_HOST when it names one, else
// /var/run/docker.sock.
func engineSocket() string {
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		return h
	}
	return "/var/run/docker.sock"
}

// TestFakeEngineSpeaksLikeTheEngine runs the same project on the engine and on the fake
// docker and compares, through the Engine API of each (the real one on its socket, the
// fake one on deploydtest.NewDocker's), the keys and JSON kinds of the items of GET
// /containers/json, of GET /containers/{id}/json and of the test image's item of GET
// /images/json. A field the real engine sends must be in the fake with the same kind,
// or listed in notModelled with the reason the agent can do without it.
func TestFakeEngineSpeaksLikeTheEngine(t *testing.T) {
	needBackend(t, engine)
	dir, project := shapesProject(t, "monky-e2e-apishapes-")
	up := exec.Command("docker", "compose", "-p", project, "up", "-d")
	up.Dir = dir
	out, err := up.CombinedOutput()
	require.NoError(t, err, "%s", out)

	filter := "/containers/json?all=1&filters=" + url.QueryEscape(`{"label":["com.docker.compose.project=`+project+`"]}`)
	read := func(client *http.Client, wantImage string) (list, inspected, images []map[string]any) {
		apiGet(t, client, filter, &list)
		require.Len(t, list, 2)
		for _, c := range list {
			var o map[string]any
			apiGet(t, client, "/containers/"+c["Id"].(string)+"/json", &o)
			inspected = append(inspected, o)
		}
		var all []map[string]any
		apiGet(t, client, "/images/json", &all)
		for _, im := range all {
			tags, _ := im["RepoTags"].([]any)
			if slices.Contains(tags, any(wantImage)) {
				images = append(images, im)
			}
		}
		require.Len(t, images, 1, "the test image %s in /images/json", wantImage)
		return list, inspected, images
	}
	realClient := unixClient(engineSocket())
	testprog.WaitFor(t, 30*time.Second, "web to be unhealthy", func() bool {
		var o []map[string]any
		apiGet(t, realClient, filter, &o)
		return slices.ContainsFunc(o, func(c map[string]any) bool { return strings.Contains(c["Status"].(string), "(unhealthy)") })
	})
	realList, realInspect, realImages := read(realClient, built.image)

	d := deploydtest.NewDocker(t, &fakedocker.Options{Script: &fakedocker.Script{Services: map[string]fakedocker.Service{
		"web": {States: []fakedocker.State{{Health: "unhealthy"}}},
		"job": {States: []fakedocker.State{{State: "exited"}}},
	}}})
	fakeUp := exec.Command(d.Path, "compose", "-p", project, "--project-directory", dir, "up", "-d")
	fakeUp.Env = d.Env()
	out, err = fakeUp.CombinedOutput()
	require.NoError(t, err, "%s", out)
	fakeList, fakeInspect, fakeImages := read(d.HTTPClient(), built.image)

	for _, tc := range []struct {
		name       string
		real, fake []map[string]any
		must       []string
	}{
		{"containers/json", realList, fakeList, []string{"Id:string", "Names:array", "Image:string", "ImageID:string",
			"Labels:object", "State:string", "Status:string", "Created:number"}},
		{"containers/{id}/json", realInspect, fakeInspect, []string{"Id:string", "Name:string", "Image:string", "State.Status:string",
			"State.ExitCode:number", "State.Health.Status:string", "State.Health.Log[].Output:string", "RestartCount:number", "Config.Labels:object"}},
		{"images/json", realImages, fakeImages, []string{"Id:string", "RepoTags:array", "Size:number", "Created:number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, unmatched := withoutNotModelled(objectShapes(tc.real), notModelled[tc.name])
			assert.Empty(t, unmatched, "listed as not modelled but the engine does not send them: drop them from the list")
			require.Subset(t, want, tc.must)
			assert.Equal(t, want, objectShapes(tc.fake), "the fake engine's keys and kinds; a field the fake may lack goes into notModelled with a reason")
		})
	}
}
