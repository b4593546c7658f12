package fakedocker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// serving is one Serve running in a goroutine.
type serving struct {
	line   served
	stdin  *io.PipeWriter
	stderr *testprog.SyncBuffer
	done   chan int
}

// startServe runs Serve as the program at exe would, and waits for its line.
func startServe(t *testing.T, ctx context.Context, exe string, args, env []string) *serving {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &serving{stdin: inW, stderr: &testprog.SyncBuffer{}, done: make(chan int, 1)}
	go func() {
		s.done <- serve(ctx, exe, args, env, inR, outW, s.stderr)
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err, "no line from Serve: %s", s.stderr.String())
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	require.NoError(t, json.Unmarshal([]byte(line), &s.line), line)
	t.Cleanup(func() {
		_ = inW.Close()
		s.wait(t)
	})
	return s
}

// wait returns Serve's exit code (again, to the next wait).
func (s *serving) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-s.done:
		s.done <- code
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop")
		return -1
	}
}

// TestServeSharesTheProgramsState: serve-engine reads its paths from the configFile
// next to the program, prints the DOCKER_HOST of its socket, and answers from the same
// state as the program's compose up; closing stdin stops it and removes the socket.
func TestServeSharesTheProgramsState(t *testing.T) {
	dir := t.TempDir()
	cfg := config{Log: filepath.Join(dir, "docker.log"), State: filepath.Join(dir, "docker.state"), Script: filepath.Join(dir, "script.json")}
	require.NoError(t, cfg.writeFile(filepath.Join(dir, configFile)))
	require.NoError(t, (&Script{ServerVersion: "26.1.4"}).writeFile(cfg.Script))
	s := startServe(t, t.Context(), filepath.Join(dir, "docker"), nil, []string{"PATH=/usr/bin"})
	assert.Equal(t, "unix://"+s.line.Socket, s.line.DockerHost)
	assert.Equal(t, cfg.Log, s.line.Log)
	assert.Equal(t, cfg.State, s.line.State)
	assert.Equal(t, cfg.Script, s.line.Script)
	assert.LessOrEqual(t, len(s.line.Socket), 107)

	// the program, as the agent runs it: no FAKE_DOCKER_* variable, the config file
	project, err := filepath.Abs("testdata")
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	code := play(cfg, []string{"compose", "--project-name", "p", "--project-directory", project, "-f", "compose.yaml", "up", "-d"}, []string{"PATH=/usr/bin"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())

	c := (&Docker{Socket: s.line.Socket}).HTTPClient()
	resp, err := c.Get("http://docker/containers/json?all=1")
	require.NoError(t, err)
	var list []map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	_ = resp.Body.Close()
	assert.NotEmpty(t, list, "the engine shows the containers of the program's up")
	resp, err = c.Get("http://docker/version")
	require.NoError(t, err)
	var v struct{ Version string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	_ = resp.Body.Close()
	assert.Equal(t, "26.1.4", v.Version, "the engine plays the program's script")
	assert.Equal(t, apiVersion, resp.Header.Get("Api-Version"), "over the socket too")
	c.CloseIdleConnections()

	calls, err := readCalls(cfg.Log)
	require.NoError(t, err)
	require.Len(t, calls, 3, "the up and the two requests are in the one record; serve-engine itself is not")
	assert.Equal(t, []string{EngineArgv0, "GET", "/containers/json"}, calls[1].Argv)

	require.NoError(t, s.stdin.Close())
	assert.Equal(t, 0, s.wait(t), s.stderr.String())
	_, err = os.Stat(s.line.Socket)
	assert.ErrorIs(t, err, os.ErrNotExist, "the socket is removed")
	_, err = os.Stat(filepath.Dir(s.line.Socket))
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary directory is removed")
}

// TestServeFlagsAndEnvironment: -config and -socket name the files, FAKE_DOCKER_*
// win over the config as they do for the program, and with -watch-stdin=false only
// the context (the program's signal) stops it.
func TestServeFlagsAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "elsewhere.json")
	require.NoError(t, config{Log: filepath.Join(dir, "a.log")}.writeFile(cfgPath))
	sockDir, err := os.MkdirTemp("", "fd")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "s.sock")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := startServe(t, ctx, "/nonexistent/docker", []string{"-config", cfgPath, "-socket", sock, "-watch-stdin=false"},
		[]string{envState + "=" + filepath.Join(dir, "b.state")})
	assert.Equal(t, "unix://"+sock, s.line.DockerHost)
	assert.Equal(t, filepath.Join(dir, "a.log"), s.line.Log, "from -config")
	assert.Equal(t, filepath.Join(dir, "b.state"), s.line.State, "FAKE_DOCKER_STATE wins")
	require.NoError(t, s.stdin.Close())
	select {
	case code := <-s.done:
		t.Fatalf("Serve stopped (exit %d) when stdin closed with -watch-stdin=false", code)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	assert.Equal(t, 0, s.wait(t), s.stderr.String())
	_, err = os.Stat(sock)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestServeRefuses: each bad start exits non-zero with a message that names what is
// wrong, and prints no line.
func TestServeRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{"), 0o644))
	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, config{Script: "/x.json"}.writeFile(empty))
	long := "/tmp/" + strings.Repeat("x", 120) + ".sock"
	tests := []struct {
		name string
		args []string
		env  []string
		code int
		says string
	}{
		{name: "no config at all", args: nil, code: 2, says: "no state to serve"},
		{name: "a config without log or state", args: []string{"-config", empty}, code: 2, says: empty + " names no log or state"},
		{name: "a config that does not parse", args: []string{"-config", bad}, code: 2, says: bad},
		{name: "an argument", args: []string{"-config", empty, "extra"}, env: []string{envLog + "=/tmp/l"}, code: 2, says: `unexpected argument "extra"`},
		{name: "an unknown flag", args: []string{"-port", "1"}, code: 2, says: "-port"},
		{name: "a socket path too long", args: []string{"-socket", long}, env: []string{envLog + "=" + filepath.Join(dir, "l")}, code: 1, says: "more than the 107"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := serve(t.Context(), filepath.Join(dir, "bin", "docker"), tt.args, tt.env, strings.NewReader(""), &out, &errOut)
			assert.Equal(t, tt.code, code)
			assert.Empty(t, out.String(), "no line")
			assert.Contains(t, errOut.String(), tt.says)
		})
	}
}
