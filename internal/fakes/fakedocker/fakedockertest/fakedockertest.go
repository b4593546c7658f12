package fakedockertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

// Call is one recorded invocation of the fake docker.
type Call = fakedocker.Call

// Script is the scripted compose behaviour; see package fakedocker.
type Script = fakedocker.Script

// Docker is one installed fake docker: a program shared by the test process, with a
// record, a state and a script of its own.
type Docker struct {
	// Path is the docker program (a file named "docker"), with its
	// fakedocker.ConfigFile next to it.
	Path string
	// Dir is the directory holding Path, of this Docker only: put it first on PATH.
	Dir string
	// Log is the file that records every call (FAKE_DOCKER_LOG).
	Log string
	// State is the state file (FAKE_DOCKER_STATE).
	State string
	// Script is the script file (FAKE_DOCKER_SCRIPT), "" without a script.
	Script string
	// Socket is the unix socket of the fake docker Engine API (fakedocker.Engine),
	// served from the same record, state and script while the test runs; Env gives
	// it as DOCKER_HOST.
	Socket string

	tb testing.TB // fails the test when the record or the state cannot be read
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Install builds the fake docker (once per test process), writes script (nil: every
// command succeeds) into a fresh temporary directory of tb, and returns the Docker.
// The directory holds the program (a hard link to the shared build, or a copy) and,
// next to it, its fakedocker.ConfigFile naming Log, State and the script file: a
// program that gives docker only PATH (the agent binary, through deployd.DockerEnv)
// still reaches this Docker. A caller that runs the program itself may give it Env.
//
// Install also serves the fake Engine API over the same record, state and script on
// a unix socket, Socket, in a short temporary directory of its own (a socket path is
// at most 107 bytes, and tb.TempDir can be longer); tb.Cleanup stops it.
func Install(tb testing.TB, script *Script) *Docker {
	tb.Helper()
	buildOnce.Do(func() { buildDir, buildErr = build() })
	if buildErr != nil {
		tb.Fatalf("fakedockertest: %v", buildErr)
	}
	dir := tb.TempDir()
	bin := filepath.Join(dir, "bin")
	d := &Docker{
		Path:  filepath.Join(bin, "docker"),
		Dir:   bin,
		Log:   filepath.Join(dir, "docker.log"),
		State: filepath.Join(dir, "docker.state"),
		tb:    tb,
	}
	if err := os.Mkdir(bin, 0o755); err != nil {
		tb.Fatalf("fakedockertest: %v", err)
	}
	if err := fakedocker.PlaceProgram(filepath.Join(buildDir, "docker"), d.Path); err != nil {
		tb.Fatalf("fakedockertest: install the fake docker: %v", err)
	}
	cfg := fakedocker.Config{Log: d.Log, State: d.State, Script: d.scriptPath()}
	if err := cfg.WriteFile(filepath.Join(bin, fakedocker.ConfigFile)); err != nil {
		tb.Fatalf("fakedockertest: write %s: %v", fakedocker.ConfigFile, err)
	}
	if script != nil {
		d.Script = d.scriptPath()
		if err := script.WriteFile(d.Script); err != nil {
			tb.Fatalf("fakedockertest: write script: %v", err)
		}
	}
	sockDir, err := os.MkdirTemp("", "fd")
	if err != nil {
		tb.Fatalf("fakedockertest: %v", err)
	}
	srv, err := fakedocker.ServeEngine(filepath.Join(sockDir, "docker.sock"), cfg)
	if err != nil {
		_ = os.RemoveAll(sockDir)
		tb.Fatalf("fakedockertest: %v", err)
	}
	d.Socket = srv.Socket
	tb.Cleanup(func() {
		if err := srv.Close(); err != nil {
			tb.Errorf("fakedockertest: stop the fake engine: %v", err)
		}
		_ = os.RemoveAll(sockDir) // empty once the socket is removed; nothing to report
	})
	return d
}

// DockerHost is the DOCKER_HOST that reaches the fake engine: "unix://" + Socket.
func (d *Docker) DockerHost() string { return "unix://" + d.Socket }

// HTTPClient returns a client whose every request goes to the fake engine's socket,
// whatever the URL's host ("http://docker/_ping").
func (d *Docker) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.Socket)
	}}}
}

// scriptPath is where the script of d is, once there is one.
func (d *Docker) scriptPath() string { return filepath.Join(filepath.Dir(d.Log), "script.json") }

// SetScript replaces the script (nil: every command succeeds), for a test that changes
// the behaviour between calls.
func (d *Docker) SetScript(script *Script) {
	tb := d.tb
	tb.Helper()
	if d.Script == "" {
		d.Script = d.scriptPath()
	}
	if script == nil {
		script = &Script{}
	}
	if err := script.WriteFile(d.Script); err != nil {
		tb.Fatalf("fakedockertest: write script: %v", err)
	}
}

// Env returns the complete environment for the fake when the caller runs it itself:
// PATH with Dir only, DOCKER_HOST (the fake engine; the fake program ignores it, an
// Engine API client of the code under test finds the socket there) and the
// FAKE_DOCKER_* variables, followed by extra ("K=V"). The agent binary passes docker
// no FAKE_DOCKER_* variable; the fake then reads the same paths from its
// fakedocker.ConfigFile.
func (d *Docker) Env(extra ...string) []string {
	env := []string{
		"PATH=" + d.Dir,
		"DOCKER_HOST=" + d.DockerHost(),
		fakedocker.EnvLog + "=" + d.Log,
		fakedocker.EnvState + "=" + d.State,
	}
	if d.Script != "" {
		env = append(env, fakedocker.EnvScript+"="+d.Script)
	}
	return append(env, extra...)
}

// Calls returns the calls recorded so far, oldest first.
func (d *Docker) Calls() []Call {
	tb := d.tb
	tb.Helper()
	calls, err := fakedocker.ReadCalls(d.Log)
	if err != nil {
		tb.Fatalf("fakedockertest: %v", err)
	}
	return calls
}

// Status returns the fake's state (is the project up, did down remove volumes, how
// often was each command called).
func (d *Docker) Status() fakedocker.Status {
	tb := d.tb
	tb.Helper()
	st, err := fakedocker.ReadStatus(d.State)
	if err != nil {
		tb.Fatalf("fakedockertest: %v", err)
	}
	return st
}

// goToolPath finds the go tool on PATH; under go test that is the running toolchain's,
// since go test puts its GOROOT/bin first on PATH.
func goToolPath() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go tool to build the fake docker: %w", err)
	}
	return goTool, nil
}

// build compiles cmd/fake-docker into a new temporary directory as "docker". The
// directory is left for the life of the machine's temp cleaning: it is shared by every
// test of the process and no hook runs when the process ends.
func build() (string, error) {
	goTool, err := goToolPath()
	if err != nil {
		return "", err
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the fakedockertest source directory")
	}
	dir, err := os.MkdirTemp("", "fake-docker-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, "docker"), "github.com/monky/monky-deployd/cmd/fake-docker")
	cmd.Dir = filepath.Dir(self)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cmd/fake-docker: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return dir, nil
}
