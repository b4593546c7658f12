package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// TestServeEngineStopsOnSIGTERM: the program built as docker dispatches serve-engine,
// finds its fake-docker.json next to itself, prints its line, and on SIGTERM exits 0
// and removes its socket; as docker it still plays docker.
func TestServeEngineStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program")
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "docker")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", prog, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	log := filepath.Join(dir, "docker.log")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fake-docker.json"), []byte(`{"log":"`+log+`"}`), 0o644))
	cmd := exec.CommandContext(t.Context(), prog, "serve-engine", "-watch-stdin=false")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "no line")
	var served struct {
		DockerHost string `json:"docker_host"`
		Socket     string `json:"socket"`
		Log        string `json:"log"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &served), line)
	require.Equal(t, log, served.Log, "the log of fake-docker.json")
	require.Equal(t, "unix://"+served.Socket, served.DockerHost)
	out, err = exec.CommandContext(t.Context(), prog, "version", "--format", "{{.Server.Version}}").Output()
	require.NoError(t, err, "docker version beside serve-engine")
	require.Equal(t, fakedocker.DefaultServerVersion+"\n", string(out), "docker version beside serve-engine")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "serve-engine after SIGTERM")
	case <-time.After(10 * time.Second):
		t.Fatal("serve-engine did not stop on SIGTERM")
	}
	_, err = os.Stat(served.Socket)
	require.ErrorIs(t, err, os.ErrNotExist, "the socket is still there")
}
