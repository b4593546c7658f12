package fakedocker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allSet fails unless every field of v, recursively into structs, maps, slices and
// pointers, is set: the conversion test below then covers every field.
func allSet(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if v.IsZero() {
		t.Errorf("%s is not set in the test's script", path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			allSet(t, path+"."+v.Type().Field(i).Name, v.Field(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			allSet(t, path+"["+k.String()+"]", v.MapIndex(k))
		}
	case reflect.Slice:
		for i := range v.Len() {
			allSet(t, path, v.Index(i))
		}
	case reflect.Pointer:
		allSet(t, path, v.Elem())
	}
}

// TestScriptFile: a script with every field set reaches the program's script file
// whole, in the JSON a harness in another language writes (delay as a Go duration).
func TestScriptFile(t *testing.T) {
	yes := true
	st := State{State: "exited", Health: "unhealthy", ExitCode: 3, Status: "Exited (3) 1 second ago", HealthOutput: "boom", RestartCount: 2, Times: 4}
	svc := Service{Image: "nginx:1.27", ImageSize: 42, Healthcheck: &yes, States: []State{st}, Logs: "hello\n"}
	s := &Script{
		PSFormat: PSArray, ServerVersion: "20.10.24",
		Commands:      map[string]Command{"up": {Stdout: "o", Stderr: "e", Exit: 1, FailTimes: 2, Delay: 1500 * time.Millisecond}},
		Services:      map[string]Service{"web": svc},
		Releases:      map[string]map[string]Service{"abc": {"web": svc}},
		MissingImages: []string{"acme/web:9"}, DockerRootDir: "/var/lib/docker",
		Hooks: map[string]Hook{"backup": {Stdout: "o", Stderr: "e", Exit: 75, FailTimes: 1, Delay: "2s", Echo: []string{"DB_PASSWORD"}}},
	}
	allSet(t, "Script", reflect.ValueOf(*s))
	require.NoError(t, s.Validate())

	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, s.writeFile(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"delay": "1.5s"`)
	assert.Contains(t, string(data), `"fail_times": 2`)
	got, err := readScript(path)
	require.NoError(t, err, "the program reads the file (it refuses unknown fields)")
	assert.Equal(t, s, got)

	for _, tc := range []struct{ file, says, why string }{
		{`{"commands":{"up":{"delay":2}}}`, "delay", "a delay is a string such as \"2s\""},
		{`{"commands":{"up":{"delay":"soon"}}}`, `delay "soon"`, "a delay is a Go duration"},
		{`{"commands":{"up":{"dealy":"2s"}}}`, "dealy", "an unknown field of a command"},
		{`{"services":{"web":{"states":[{"state":"stopped"}]}}}`, `Services["web"].States[0]: State "stopped"`, "the program validates what it reads"},
		{`{"ps_fromat":"array"}`, `unknown field "ps_fromat"`, "an unknown field of the script"},
		{`{"ps_format":"yaml"}`, `PSFormat "yaml"`, "a bad ps format"},
		{`services: {}`, "invalid character", "JSON only"},
	} {
		require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o644))
		_, err = readScript(path)
		assert.ErrorContains(t, err, tc.says, tc.why)
		var out, errOut bytes.Buffer
		assert.Equal(t, 1, play(config{}, []string{"compose", "ps"}, []string{envScript + "=" + path}, &out, &errOut), tc.why)
		assert.Contains(t, errOut.String(), "script", "the program says which file is wrong: %s", tc.why)
	}
}

// TestScriptValidate: each mistake is named by its path in the script.
func TestScriptValidate(t *testing.T) {
	tests := []struct {
		name   string
		script Script
		says   []string
	}{
		{name: "ps format", script: Script{PSFormat: "table"}, says: []string{`PSFormat "table"`}},
		{name: "a command that is not one", script: Script{Commands: map[string]Command{"upp": {}}}, says: []string{`Commands["upp"]: not a command`, "up, down, ps"}},
		{name: "negative delay", script: Script{Commands: map[string]Command{"ps": {Delay: -time.Second}}}, says: []string{`Commands["ps"]: Exit, FailTimes and Delay`}},
		{name: "a state", script: Script{Services: map[string]Service{"web": {States: []State{{}, {State: "stopped"}}}}}, says: []string{`Services["web"].States[1]: State "stopped"`}},
		{name: "a health", script: Script{Releases: map[string]map[string]Service{"abc": {"db": {States: []State{{Health: "ok"}}}}}}, says: []string{`Releases["abc"]["db"].States[0]: Health "ok"`}},
		{name: "negative times", script: Script{Services: map[string]Service{"web": {States: []State{{Times: -1}}}}}, says: []string{`Services["web"].States[0]: Times and RestartCount`}},
		{name: "a release that is a path", script: Script{Releases: map[string]map[string]Service{"releases/abc": {}}}, says: []string{`Releases["releases/abc"]: a release is the base name`}},
		{name: "an unnamed service", script: Script{Services: map[string]Service{"": {}}}, says: []string{`Services[""]: a service needs a name`}},
		{name: "a negative image size", script: Script{Services: map[string]Service{"web": {ImageSize: -1}}}, says: []string{`Services["web"]: ImageSize`}},
		{name: "a relative data root", script: Script{DockerRootDir: "var/lib/docker"}, says: []string{`DockerRootDir "var/lib/docker": want an absolute path`}},
		{name: "a missing image that is no reference", script: Script{MissingImages: []string{"a b"}}, says: []string{`MissingImages[0] "a b"`}},
		{name: "every mistake at once", script: Script{PSFormat: "x", Commands: map[string]Command{"pulll": {}}}, says: []string{"PSFormat", `Commands["pulll"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.script.Validate()
			require.Error(t, err)
			for _, s := range tt.says {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
	assert.NoError(t, (*Script)(nil).Validate())
	assert.NoError(t, (&Script{}).Validate())
}

// TestCall: Compose finds the subcommand after compose's global flags.
func TestCall(t *testing.T) {
	up := Call{Argv: []string{"compose", "--project-name", "ps", "--project-directory", "/srv/up", "-f", "down", "--dry-run", "up", "-d", "--remove-orphans"}}
	assert.True(t, up.Compose("up"))
	assert.False(t, up.Compose("ps"), "a flag's value is not the subcommand")
	assert.False(t, up.Compose("down"))
	assert.False(t, Call{Argv: []string{"inspect", "--type", "container", "up"}}.Compose("up"))
	assert.False(t, Call{Argv: []string{EngineArgv0, "GET", "/containers/json"}}.Compose("ps"))
	assert.False(t, Call{}.Compose("up"))
	assert.True(t, Call{Argv: []string{"compose", "ps", "--all"}}.Compose("ps"))

	// EngineCommand: a request to the Engine API names the docker command that reads
	// the same (readCommand); another path, or a run of the program, names none.
	for path, want := range map[string]string{
		"/version": "version", "/containers/json": "ps", "/containers/abc/json": "inspect",
		"/containers//json": "", "/images/json": "", "/_ping": "", "/containers/abc/logs": "",
	} {
		assert.Equal(t, want, Call{Argv: []string{EngineArgv0, "GET", path}}.EngineCommand(), path)
	}
	assert.Equal(t, "", Call{Argv: []string{"compose", "ps"}}.EngineCommand())
	assert.Equal(t, "", Call{Argv: []string{"ps", "GET", "/containers/json"}}.EngineCommand())
}

// docker runs the installed program with Env only, in dir, as the code under test would.
func docker(t *testing.T, d *Docker, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), d.Path, args...)
	cmd.Env, cmd.Dir = d.Env(), dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "docker %v: %s", args, out)
	return string(out)
}

// TestInstall: the program found on Env's PATH and the Engine API at Env's
// DOCKER_HOST share one state and one record; SetScript changes what both play; Close
// removes everything Install made, but for a directory of the caller's.
func TestInstall(t *testing.T) {
	d, err := Install(t.Context(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	env := d.Env("EXTRA=1")
	assert.Equal(t, []string{"PATH=" + d.Dir, "DOCKER_HOST=unix://" + d.Socket, "EXTRA=1"}, env)
	assert.LessOrEqual(t, len(d.Socket), 107)

	again, err := Install(t.Context(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = again.Close() })
	prog, err := program(t.Context())
	require.NoError(t, err)
	built, err := os.Stat(prog)
	require.NoError(t, err)
	for _, p := range []string{d.Path, again.Path} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.True(t, os.SameFile(built, fi), "built once per process: %s is a link to the one build", p)
	}
	assert.NotEqual(t, d.Dir, again.Dir, "each Install has its own program directory")
	serve := exec.CommandContext(t.Context(), prog, "serve-engine")
	refusal, err := serve.CombinedOutput()
	assert.Error(t, err, "Build's program has no Engine API")
	assert.Equal(t, 2, serve.ProcessState.ExitCode(), "Build's program has no Engine API: %s", refusal)
	assert.Contains(t, string(refusal), "go install "+ProgramPackage+" for serve-engine")
	assert.NotEqual(t, d.Log, again.Log, "each Install has its own record")

	project := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(project, "compose.yaml"), []byte("services:\n  web:\n    image: nginx:1.27\n    healthcheck:\n      test: [\"CMD\", \"true\"]\n"), 0o644))
	docker(t, d, project, "compose", "--project-name", "demo", "up", "-d")

	resp, err := d.HTTPClient().Get("http://docker/containers/json?all=1")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	var list []struct {
		Names  []string
		Status string
	}
	require.NoError(t, json.Unmarshal(body, &list), "%s", body)
	require.Len(t, list, 1)
	assert.Equal(t, []string{"/demo-web-1"}, list[0].Names)
	assert.Contains(t, list[0].Status, "(healthy)")

	require.NoError(t, d.SetScript(&Script{PSFormat: PSArray, Services: map[string]Service{"web": {States: []State{{Health: "unhealthy"}}}}}))
	out := docker(t, d, project, "compose", "--project-name", "demo", "ps", "--all", "--format", "json")
	assert.True(t, strings.HasPrefix(out, "["), "the script's array shape: %s", out)
	assert.Contains(t, out, `"Health":"unhealthy"`)

	calls, err := d.Calls()
	require.NoError(t, err)
	require.Len(t, calls, 3)
	assert.True(t, calls[0].Compose("up"))
	assert.Equal(t, project, calls[0].Dir)
	assert.Equal(t, []string{"DOCKER_HOST", "PATH"}, calls[0].Env, "names only, and no FAKE_DOCKER_* needed")
	assert.Equal(t, []string{EngineArgv0, "GET", "/containers/json"}, calls[1].Argv)
	assert.Equal(t, "all=1", calls[1].Query)
	assert.True(t, calls[2].Compose("ps"))
	st, err := d.Status()
	require.NoError(t, err)
	assert.True(t, st.Up)
	assert.Equal(t, "demo", st.Project)
	assert.Equal(t, []string{"web"}, st.Services)
	assert.Equal(t, 2, st.Reads, "the engine's list and compose ps are one counter")
	assert.Equal(t, []string{"nginx:1.27"}, st.Images)

	root := filepath.Dir(d.Dir)
	require.NoError(t, d.Close())
	for _, p := range []string{root, d.Socket, filepath.Dir(d.Socket)} {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s is removed", p)
	}
	assert.NoError(t, d.Close(), "a second Close")

	// Options.Dir and Options.Program are used as given; Close leaves the caller's
	// directory
	root = t.TempDir()
	d, err = Install(t.Context(), Options{Dir: root, Program: prog, Script: &Script{ServerVersion: "20.10.24"}})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "bin"), d.Dir)
	assert.Equal(t, filepath.Join(root, "bin", "docker"), d.Path)
	out = docker(t, d, root, "version", "--format", "{{.Server.Version}}")
	assert.Equal(t, "20.10.24\n", out)
	cfg, err := readConfig(filepath.Join(d.Dir, configFile))
	require.NoError(t, err)
	assert.Equal(t, config{Log: d.Log, State: d.State, Script: d.Script}, cfg)
	require.NoError(t, d.Close())
	_, err = os.Stat(d.Log)
	assert.NoError(t, err, "the caller's directory stays, with the record")
}

// TestInstallRefuses: each bad option is named, and nothing is left behind; Build
// without a go tool says what to do instead.
func TestInstallRefuses(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "docker")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	used := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(used, "bin"), 0o755))
	prog, err := program(t.Context())
	require.NoError(t, err)
	tests := []struct {
		name string
		opts Options
		says string
	}{
		{name: "a bad script", opts: Options{Script: &Script{PSFormat: "table"}}, says: `Options.Script: PSFormat "table"`},
		{name: "no program there", opts: Options{Program: "/nonexistent/fake-docker"}, says: "Options.Program /nonexistent/fake-docker is not an executable file"},
		{name: "a program that is not executable", opts: Options{Program: notExec}, says: "is not an executable file"},
		{name: "a directory that is not one", opts: Options{Program: prog, Dir: notExec}, says: "Options.Dir " + notExec + " is not an existing directory"},
		{name: "a directory already used", opts: Options{Program: prog, Dir: used}, says: "file exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Install(t.Context(), tt.opts)
			require.Error(t, err)
			assert.Nil(t, d)
			assert.Contains(t, err.Error(), tt.says)
		})
	}
	var d Docker
	assert.ErrorContains(t, d.SetScript(&Script{Commands: map[string]Command{"pulll": {}}}), `SetScript: Commands["pulll"]`, "SetScript validates")
	assert.ErrorContains(t, d.SetScript(nil), "a Docker that Install did not make")

	// without a go tool, Build says what to do instead
	t.Setenv("PATH", t.TempDir())
	err = Build(context.Background(), filepath.Join(t.TempDir(), "docker"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set Options.Program")
}

// TestBuildLinksNoHTTP: the program Build builds, which a test starts hundreds of
// times, plays docker without net/http, which would double the cost of each start.
func TestBuildLinksNoHTTP(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-tags", cliTag, "-deps", ProgramPackage).CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	assert.Contains(t, deps, "github.com/monky/monky-deployd/deployd/deploydtest/fakedocker")
	assert.NotContains(t, deps, "net/http")
}
