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
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", prog, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	log := filepath.Join(dir, "docker.log")
	if err := os.WriteFile(filepath.Join(dir, "fake-docker.json"), []byte(`{"log":"`+log+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), prog, "serve-engine", "-watch-stdin=false")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no line: %v", err)
	}
	var served struct {
		DockerHost string `json:"docker_host"`
		Socket     string `json:"socket"`
		Log        string `json:"log"`
	}
	if err := json.Unmarshal([]byte(line), &served); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if served.Log != log || served.DockerHost != "unix://"+served.Socket {
		t.Fatalf("served %+v, want the log of fake-docker.json", served)
	}
	if out, err := exec.CommandContext(t.Context(), prog, "version", "--format", "{{.Server.Version}}").Output(); err != nil || string(out) != fakedocker.DefaultServerVersion+"\n" {
		t.Fatalf("docker version beside serve-engine: %v %q", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve-engine after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve-engine did not stop on SIGTERM")
	}
	if _, err := os.Stat(served.Socket); !os.IsNotExist(err) {
		t.Fatalf("the socket %s is still there: %v", served.Socket, err)
	}
}
