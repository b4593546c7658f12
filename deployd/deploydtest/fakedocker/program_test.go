package fakedocker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// env is a test environment: a log, a state and optionally a script.
type env struct {
	t      *testing.T
	dir    string
	log    string
	vars   []string
	script string
}

func newEnv(t *testing.T, script *Script) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, log: filepath.Join(dir, "docker.log")}
	e.vars = []string{envLog + "=" + e.log, "SECRET_LOOKING_VAR=hunter2"}
	if script != nil {
		e.script = filepath.Join(dir, "script.json")
		require.NoError(t, script.writeFile(e.script))
		e.vars = append(e.vars, envScript+"="+e.script)
	}
	return e
}

// run calls play like docker would be called and returns exit code, stdout, stderr.
func (e *env) run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := play(config{}, args, e.vars, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustRun is run that requires exit 0.
func (e *env) mustRun(args ...string) (stdout, stderr string) {
	e.t.Helper()
	code, stdout, stderr := e.run(args...)
	require.Equal(e.t, 0, code, "docker %v: %s", args, stderr)
	return stdout, stderr
}

// compose runs docker compose on the testdata project.
func (e *env) compose(args ...string) (int, string, string) { return e.run(composeArgv(e.t, args)...) }

func (e *env) mustCompose(args ...string) (stdout, stderr string) {
	e.t.Helper()
	return e.mustRun(composeArgv(e.t, args)...)
}

func composeArgv(t *testing.T, args []string) []string {
	dir, err := filepath.Abs("testdata")
	require.NoError(t, err)
	return append([]string{"compose", "--project-name", "p", "--project-directory", dir, "-f", "compose.yaml", "-f", "override.yaml"}, args...)
}

func (e *env) status() fakeState {
	st, err := readStatus(e.log + ".state")
	require.NoError(e.t, err)
	return st
}

func psServices(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		got[m["Service"].(string)] = m
	}
	return got
}

func TestRecord(t *testing.T) {
	e := newEnv(t, nil)
	e.vars = append(e.vars, "PATH=/usr/bin", "PATH=/bin")
	e.mustRun("version", "--format", "{{.Server.Version}}")
	calls, err := readCalls(e.log)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	wd, _ := os.Getwd()
	assert.Equal(t, []string{"version", "--format", "{{.Server.Version}}"}, calls[0].Argv)
	assert.Equal(t, wd, calls[0].Dir)
	assert.Equal(t, []string{envLog, "PATH", "SECRET_LOOKING_VAR"}, calls[0].Env, "names only, sorted, once")
	assert.WithinDuration(t, time.Now(), calls[0].Time, time.Minute)
	raw, err := os.ReadFile(e.log)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "hunter2", "values are never recorded")
	assert.NotContains(t, string(raw), "/usr/bin")

	// concurrent calls: every line whole, no counter update lost
	e = newEnv(t, nil)
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var out, errOut bytes.Buffer
			play(config{}, []string{"version", "--format", fmt.Sprintf("{{.Server.Version}}-%d-%s", i, strings.Repeat("x", 2000))}, e.vars, &out, &errOut)
		})
	}
	wg.Wait()
	calls, err = readCalls(e.log)
	require.NoError(t, err, "every line is whole JSON")
	assert.Len(t, calls, n)
	assert.Equal(t, n, e.status().Calls["version"], "the state counter lost no update")
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no args", nil, "no command"},
		{"unknown command", []string{"run", "alpine"}, `unknown command "run"`},
		{"unknown compose command", []string{"compose", "exec", "web"}, `unknown command "docker compose exec"`},
		{"no compose subcommand", []string{"compose", "-p", "x"}, "no subcommand"},
		{"unknown global flag", []string{"compose", "--verbose", "ps"}, "unknown flag --verbose"},
		{"unknown up flag", []string{"compose", "up", "-d", "--frobnicate"}, "unknown flag --frobnicate for docker compose up"},
		{"up attached", []string{"compose", "up", "--remove-orphans"}, "up without -d"},
		{"missing value", []string{"compose", "-p"}, "needs a value"},
		{"flag with value it does not take", []string{"compose", "down", "-v=1"}, "takes no value"},
		{"logs follow", []string{"compose", "logs", "-f"}, "never end"},
		{"bad tail", []string{"compose", "logs", "--tail", "x"}, `--tail "x"`},
		{"bad ps format", []string{"compose", "ps", "--format", "yaml"}, `ps --format "yaml"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			code, out, errOut := e.run(tc.args...)
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.want)
			calls, err := readCalls(e.log)
			require.NoError(t, err)
			assert.Len(t, calls, 1, "refused calls are recorded too")
		})
	}
}

func TestNoScript(t *testing.T) {
	e := newEnv(t, nil)
	out, _ := e.mustCompose("ps", "--all", "--format", "json")
	assert.Empty(t, out, "no containers before up: no output at all")

	e.mustCompose("up", "-d", "--remove-orphans")
	st := e.status()
	assert.True(t, st.Up)
	assert.Equal(t, []string{"cron", "db", "web", "worker"}, st.Services)
	assert.Equal(t, []string{"cron", "web"}, st.Healthchecks, "db's healthcheck is disabled by the override")

	out, _ = e.mustCompose("ps", "--all", "--format", "json")
	got := psServices(t, out)
	require.Len(t, got, 4)
	assert.Equal(t, "healthy", got["web"]["Health"])
	assert.Equal(t, "", got["db"]["Health"])
	assert.Equal(t, "running", got["worker"]["State"])
	assert.Equal(t, "p-web-1", got["web"]["Name"])
	assert.ElementsMatch(t, []string{"Command", "CreatedAt", "ExitCode", "Health", "ID", "Image", "Labels", "LocalVolumes", "Mounts", "Name", "Names", "Networks", "Ports", "Project", "Publishers", "RunningFor", "Service", "Size", "State", "Status"},
		keys(got["web"]), "the compose 2.21 field set")

	_, errOut := e.mustCompose("down", "--remove-orphans", "-v")
	assert.Contains(t, errOut, "Container p-web-1  Removed")
	assert.True(t, e.status().DownVolumes)
	out, _ = e.mustCompose("ps", "--all", "--format", "json")
	assert.Empty(t, out, "nothing after down")

	e.mustCompose("down", "--remove-orphans")
	assert.False(t, e.status().DownVolumes)
}

// TestComposeFiles: a missing compose file refuses up; docker-compose.yml is found
// in the project directory, whose name names the project; without a state file the
// project is seen as up.
func TestComposeFiles(t *testing.T) {
	e := newEnv(t, nil)
	code, _, errOut := e.run("compose", "-p", "p", "--project-directory", t.TempDir(), "-f", "compose.yaml", "up", "-d")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "compose.yaml: no such file or directory")
	assert.False(t, e.status().Up)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte("services:\n  app:\n    image: a\n"), 0o644))
	e.mustRun("compose", "--project-directory", dir, "up", "-d")
	st := e.status()
	assert.Equal(t, []string{"app"}, st.Services)
	assert.Equal(t, filepath.Base(dir), st.Project, "the project name defaults to the directory's name")

	testdata, err := filepath.Abs("testdata")
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	code = play(config{}, []string{"compose", "-p", "p", "--project-directory", testdata, "-f", "compose.yaml", "ps", "--format", "json"}, nil, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Len(t, psServices(t, stdout.String()), 3, "without a state file the project is seen as up")
}

// TestScriptedStates: a service's step n is its n-th state, each state Times times
// (Times 0 is once, the last state stays); ps plays the steps in both formats.
func TestScriptedStates(t *testing.T) {
	s := Service{States: []State{{Health: "starting", Times: 2}, {Health: "healthy"}, {Health: "unhealthy", Times: 0}}}
	var got []string
	for n := range 6 {
		got = append(got, s.step(n).Health)
	}
	assert.Equal(t, []string{"starting", "starting", "healthy", "unhealthy", "unhealthy", "unhealthy"}, got)
	assert.Equal(t, State{}, Service{}.step(3))
	for _, format := range []string{PSLines, PSArray} {
		t.Run(format, func(t *testing.T) {
			e := newEnv(t, &Script{PSFormat: format, Services: map[string]Service{
				"web":     {States: []State{{Health: "starting", Times: 2}, {Health: "unhealthy"}}},
				"migrate": {States: []State{{}, {State: "exited", ExitCode: 0}}},
				"worker":  {States: []State{{State: "restarting", ExitCode: 1}}},
			}})
			out, _ := e.mustCompose("ps", "--all", "--format", "json")
			if format == PSArray {
				assert.Equal(t, "[]\n", out)
			} else {
				assert.Empty(t, out)
			}
			e.mustCompose("up", "-d", "--remove-orphans")
			var seq []string
			for range 4 {
				out, _ := e.mustCompose("ps", "--all", "--format", "json")
				var list []map[string]any
				if format == PSArray {
					require.NoError(t, json.Unmarshal([]byte(out), &list))
					assert.Equal(t, 1, strings.Count(out, "\n"), "one line: one array")
				} else {
					for _, m := range psServices(t, out) {
						list = append(list, m)
					}
				}
				byService := map[string]map[string]any{}
				for _, m := range list {
					byService[m["Service"].(string)] = m
				}
				require.Len(t, byService, 5)
				seq = append(seq, fmt.Sprintf("%v/%v/%v", byService["web"]["Health"], byService["migrate"]["State"], byService["worker"]["Status"]))
			}
			assert.Equal(t, []string{
				"starting/running/Restarting (1) 1 second ago",
				"starting/exited/Restarting (1) 1 second ago",
				"unhealthy/exited/Restarting (1) 1 second ago",
				"unhealthy/exited/Restarting (1) 1 second ago",
			}, seq)
			out, _ = e.mustCompose("ps", "--format", "json")
			assert.NotContains(t, out, "p-migrate-1", "ps without --all hides exited containers")
			assert.Contains(t, out, "p-worker-1", "restarting is shown")
		})
	}
}

func TestScriptedCommands(t *testing.T) {
	t.Run("always failing", func(t *testing.T) {
		e := newEnv(t, &Script{Commands: map[string]Command{"up": {Stdout: "pulling\n", Stderr: "denied\n", Exit: 17}}})
		for range 2 {
			code, out, errOut := e.compose("up", "-d")
			assert.Equal(t, 17, code)
			assert.Equal(t, "pulling\n", out)
			assert.Equal(t, "denied\n", errOut)
		}
		assert.False(t, e.status().Up)
	})
	t.Run("fail then succeed", func(t *testing.T) {
		e := newEnv(t, &Script{Commands: map[string]Command{"up": {Stderr: "conflict\n", FailTimes: 2}}})
		var codes []int
		for range 3 {
			code, _, errOut := e.compose("up", "-d")
			codes = append(codes, code)
			if code == 0 {
				assert.NotContains(t, errOut, "conflict")
			}
		}
		assert.Equal(t, []int{1, 1, 0}, codes)
		assert.True(t, e.status().Up)
	})
	t.Run("success with extra output", func(t *testing.T) {
		e := newEnv(t, &Script{Commands: map[string]Command{"up": {Stderr: " Network p_default  Created\n"}}})
		_, errOut := e.mustCompose("up", "-d")
		assert.True(t, strings.HasPrefix(errOut, " Network p_default  Created\n Container"))
	})
	t.Run("delay", func(t *testing.T) {
		e := newEnv(t, &Script{Commands: map[string]Command{"ps": {Delay: 150 * time.Millisecond}}})
		start := time.Now()
		e.mustCompose("ps")
		assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	})
	t.Run("version", func(t *testing.T) {
		e := newEnv(t, &Script{ServerVersion: "28.1.0"})
		out, _ := e.mustRun("version", "--format", "{{.Server.Version}}")
		assert.Equal(t, "28.1.0\n", out)
		out, _ = e.mustRun("version")
		assert.Equal(t, "Client:\n Version:\t"+DefaultServerVersion+"\n API version:\t1.47\n\nServer:\n Engine:\n  Version:\t28.1.0\n  API version:\t1.47\n", out,
			"docker version's own layout, as docker 27 prints it")
		code, _, errOut := e.run("version", "--format", "{{.Nope")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "template parsing error")
		out, _ = e.mustRun("compose", "version", "--short")
		assert.Equal(t, fakeComposeVersion+"\n", out)
	})
	t.Run("logs", func(t *testing.T) {
		e := newEnv(t, &Script{Services: map[string]Service{"web": {Logs: "one\ntwo\nthree\n"}}})
		e.mustCompose("up", "-d")
		out, _ := e.mustCompose("logs", "--no-color", "--tail", "2", "web")
		assert.Equal(t, "p-web-1  | two\np-web-1  | three\n", out)
		out, _ = e.mustCompose("logs", "--no-color", "--tail", "0")
		assert.Empty(t, out)
		code, _, errOut := e.compose("logs", "--no-color", "nosuch")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "no such service: nosuch")
	})
}

// TestPlayConfig: the paths of fake-docker.json serve where the environment sets none; a
// variable of the environment wins; the record names only what was received; a
// script named by the config is read once it exists.
func TestPlayConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := config{Log: filepath.Join(dir, "docker.log"), Script: filepath.Join(dir, "script.json")}
	require.NoError(t, cfg.writeFile(filepath.Join(dir, configFile)))
	back, err := configNextTo(filepath.Join(dir, "docker"))
	require.NoError(t, err)
	assert.Equal(t, cfg, back)

	version := func(env ...string) string {
		var out, errOut bytes.Buffer
		code := play(back, []string{"version", "--format", "{{.Server.Version}}"}, env, &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
		return out.String()
	}
	assert.Equal(t, DefaultServerVersion+"\n", version("PATH=/bin"), "no script yet: the default")
	require.NoError(t, (&Script{ServerVersion: "27.0.0"}).writeFile(cfg.Script))
	assert.Equal(t, "27.0.0\n", version("PATH=/bin"))

	other := filepath.Join(dir, "other.log")
	version(envLog + "=" + other)
	calls, err := readCalls(cfg.Log)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"PATH"}, calls[0].Env, "only what the program received")
	calls, err = readCalls(other)
	require.NoError(t, err)
	assert.Len(t, calls, 1, "FAKE_DOCKER_LOG wins over the config")
	_, err = os.Stat(cfg.Log + ".state")
	assert.NoError(t, err, "the state defaults to the log's")

	missing, err := readConfig(filepath.Join(dir, "none.json"))
	require.NoError(t, err)
	assert.Equal(t, config{}, missing)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600))
	_, err = readConfig(filepath.Join(dir, "bad.json"))
	assert.Error(t, err)
}

// TestReadCallsSkipsALineBeingWritten: a reader that comes while a call is being
// appended (or after a kill cut one short) sees the complete lines only; a broken
// complete line is an error that names the file and the line.
func TestReadCallsSkipsALineBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "docker.log")
	require.NoError(t, os.WriteFile(path, []byte(`{"argv":["version"]}`+"\n"+`{"argv":["compose","up`), 0o644))
	calls, err := readCalls(path)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"version"}, calls[0].Argv)

	require.NoError(t, os.WriteFile(path, []byte(`{"argv":["version"]}`+"\n"+`{"argv":`+"\n"), 0o644))
	_, err = readCalls(path)
	require.ErrorContains(t, err, "docker.log line 2")
}
