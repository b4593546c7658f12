package fakedocker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ProgramPackage is the import path of the fake docker program that Build builds.
const ProgramPackage = "github.com/monky/monky-deployd/cmd/fake-docker"

// cliTag is the build tag of the program Build builds: the docker commands without
// the Engine API (cli.go).
const cliTag = "fakedocker_cli"

// Options configure Install. The zero value is ready to use.
type Options struct {
	// Dir is an existing directory to install into (it gets bin/, the record, the
	// state and the script); "": a new temporary directory, removed by Close.
	Dir string
	// Program is the fake docker program: one already built (Build, or go build of
	// ProgramPackage), or the caller's own executable when it calls Main on being run
	// as docker (os.Executable; no go tool needed). "": Install builds one, once per
	// process, into a temporary directory left for the system's temp cleaning.
	Program string
	// Script is the scripted behaviour (Script.Validate must pass); nil: every
	// command succeeds.
	Script *Script
}

// Docker is one installed fake docker: the program with its record, state and script,
// and the fake Engine API over the same files on a unix socket. Stop it with Close.
// Its methods are safe for concurrent use; the fake itself locks its state.
type Docker struct {
	// Dir is the directory holding the program, named docker, and its
	// fake-docker.json: put it first on the PATH of the code under test (Env), or
	// name Path as its docker program.
	Dir string
	// Path is the program: Dir/docker.
	Path string
	// Log is the record: one JSON line per call of the program and per request to
	// the Engine API (Calls).
	Log string
	// State is the fake's state file (Status).
	State string
	// Script is where the script is read from, on every call; the file exists once a
	// script was given (Options.Script, SetScript).
	Script string
	// Socket is the unix socket of the fake Engine API, at most 107 bytes long, in a
	// short temporary directory of its own.
	Socket string

	mu      sync.Mutex
	srv     *engineServer
	sockDir string
	ownDir  string // Options.Dir was "": removed by Close
	closed  bool
}

var (
	buildMu   sync.Mutex
	buildPath string // the process's build, once one succeeded
)

// Build builds the fake docker program (ProgramPackage) as Install runs it to the
// file dst with the go tool on PATH (go test puts the running toolchain's first), in
// the current directory: the module there must require
// github.com/monky/monky-deployd, as the package directory of a test of any module
// that imports this package does. A test runs the program hundreds of times, so it is
// built for a quick start: with -tags fakedocker_cli it plays the docker commands
// and links no net/http (Install serves the Engine API from the caller's process; its
// serve-engine command says so and exits 2), and with -ldflags=-s -w, as go test
// links test binaries. Each start costs about half the CPU of the whole program's.
func Build(ctx context.Context, dst string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("fakedocker: no go tool on PATH to build %s (set Options.Program to a built one): %w", ProgramPackage, err)
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-tags", cliTag, "-ldflags=-s -w", "-o", dst, ProgramPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("fakedocker: go build %s: %w: %s", ProgramPackage, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// program returns the process's shared build, building it on first use.
func program(ctx context.Context) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildPath != "" {
		return buildPath, nil
	}
	dir, err := os.MkdirTemp("", "fake-docker-")
	if err != nil {
		return "", fmt.Errorf("fakedocker: %w", err)
	}
	p := filepath.Join(dir, "docker")
	if err := Build(ctx, p); err != nil {
		_ = os.RemoveAll(dir) // the build error is the one to report
		return "", err
	}
	buildPath = p
	return p, nil
}

// Install puts a fake docker in place — the program (a hard link to Options.Program or
// the shared build, or a copy), its fake-docker.json and the script — and starts its
// Engine API on Socket. The code under test then finds docker on Env's PATH and the
// daemon at Env's DOCKER_HOST, and needs none of the fake's own variables.
func Install(ctx context.Context, opts Options) (*Docker, error) {
	if err := opts.Script.Validate(); err != nil {
		return nil, fmt.Errorf("fakedocker: Options.Script: %w", err)
	}
	prog := opts.Program
	if prog == "" {
		p, err := program(ctx)
		if err != nil {
			return nil, err
		}
		prog = p
	} else if fi, err := os.Stat(prog); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("fakedocker: Options.Program %s is not an executable file (build it with Build)", prog)
	}
	d := &Docker{}
	root := opts.Dir
	if root == "" {
		dir, err := os.MkdirTemp("", "fakedocker-")
		if err != nil {
			return nil, fmt.Errorf("fakedocker: %w", err)
		}
		root, d.ownDir = dir, dir
	} else if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("fakedocker: Options.Dir %s is not an existing directory", root)
	}
	if err := d.install(root, prog, opts.Script); err != nil {
		_ = d.Close() // the install error is the one to report
		return nil, err
	}
	return d, nil
}

// install lays d out under root and starts the engine.
func (d *Docker) install(root, prog string, script *Script) error {
	d.Dir = filepath.Join(root, "bin")
	d.Path = filepath.Join(d.Dir, "docker")
	d.Log = filepath.Join(root, "docker.log")
	d.State = filepath.Join(root, "docker.state")
	d.Script = filepath.Join(root, "script.json")
	if err := os.Mkdir(d.Dir, 0o755); err != nil {
		return fmt.Errorf("fakedocker: %w", err)
	}
	if err := placeProgram(prog, d.Path); err != nil {
		return fmt.Errorf("fakedocker: installing the program: %w", err)
	}
	cfg := config{Log: d.Log, State: d.State, Script: d.Script}
	if err := cfg.writeFile(filepath.Join(d.Dir, configFile)); err != nil {
		return fmt.Errorf("fakedocker: writing %s: %w", configFile, err)
	}
	if script != nil {
		if err := script.writeFile(d.Script); err != nil {
			return fmt.Errorf("fakedocker: writing the script: %w", err)
		}
	}
	sockDir, err := os.MkdirTemp("", "fd")
	if err != nil {
		return fmt.Errorf("fakedocker: %w", err)
	}
	d.sockDir = sockDir
	srv, err := serveEngine(filepath.Join(sockDir, "docker.sock"), cfg)
	if err != nil {
		return fmt.Errorf("fakedocker: %w", err)
	}
	d.srv, d.Socket = srv, srv.Socket
	return nil
}

// Close stops the Engine API, removes its socket and, when Install made the directory,
// the directory. Closing twice is a no-op.
func (d *Docker) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var srvErr error
	if d.srv != nil {
		srvErr = d.srv.Close()
	}
	// os.RemoveAll of "" (no such directory made) is nil.
	if err := errors.Join(srvErr, os.RemoveAll(d.sockDir), os.RemoveAll(d.ownDir)); err != nil {
		return fmt.Errorf("fakedocker: close: %w", err)
	}
	return nil
}

// DockerHost is the DOCKER_HOST that reaches the fake Engine API: "unix://" + Socket.
func (d *Docker) DockerHost() string { return "unix://" + d.Socket }

// Env returns the docker environment of the code under test ("K=V"): PATH with Dir
// only and DOCKER_HOST, then extra. It is what deployd.Options.DockerEnv takes; for
// the agent binary, add them to its process environment (deployd.DockerEnv passes
// both on to docker).
func (d *Docker) Env(extra ...string) []string {
	return append([]string{"PATH=" + d.Dir, "DOCKER_HOST=" + d.DockerHost()}, extra...)
}

// SetScript replaces the script (nil: every command succeeds); the next call of the
// program, or request to the Engine API, plays it.
func (d *Docker) SetScript(s *Script) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("fakedocker: SetScript: %w", err)
	}
	if d.Script == "" {
		return errors.New("fakedocker: SetScript on a Docker that Install did not make")
	}
	if s == nil {
		s = &Script{}
	}
	if err := s.writeFile(d.Script); err != nil {
		return fmt.Errorf("fakedocker: writing the script: %w", err)
	}
	return nil
}

// EngineArgv0 is the first element of the argv of a Call that records a request to the
// fake engine: ["engine", METHOD, PATH], the query in Call.Query.
const EngineArgv0 = "engine"

// Call is one recorded call of the fake docker, one JSON line of its record (Log): a
// run of the program, or a request to the Engine API.
type Call struct {
	// Argv holds the program's arguments after its name ("compose", "--project-name",
	// …), or ["engine", METHOD, PATH] for a request to the Engine API (EngineArgv0).
	Argv []string `json:"argv"`
	// Query is the raw query of an Engine API request; "" for the program.
	Query string `json:"query,omitempty"`
	// Dir is the program's working directory; "" for the Engine API.
	Dir string `json:"dir"`
	// Env holds the sorted names of the program's environment variables, never their
	// values; none for the Engine API.
	Env []string `json:"env"`
	// Time is when the call started.
	Time time.Time `json:"time"`
}

// Compose reports whether c is `docker compose … sub …`: a run of the program whose
// compose subcommand (up, down, ps, logs, version) is sub.
func (c Call) Compose(sub string) bool {
	if len(c.Argv) == 0 || c.Argv[0] != "compose" {
		return false
	}
	for i := 1; i < len(c.Argv); i++ {
		switch a := c.Argv[i]; {
		case composeGlobals[a]:
			i++ // the flag's value
		case strings.HasPrefix(a, "-"):
		default:
			return a == sub
		}
	}
	return false
}

// Calls returns the calls recorded so far, oldest first.
func (d *Docker) Calls() ([]Call, error) {
	calls, err := readCalls(d.Log)
	if err != nil {
		return nil, fmt.Errorf("fakedocker: %w", err)
	}
	return calls, nil
}

// Status is what the fake docker remembers between calls.
type Status struct {
	// Up is true after a successful up and false after down.
	Up bool
	// Project and Dir are the project name and directory of the last up.
	Project, Dir string
	// Services are the services of the last up, sorted.
	Services []string
	// Reads counts the reads of the containers since the last up (docker compose ps
	// and GET /containers/json: they play the script's states).
	Reads int
	// Calls counts the calls of each scripted command ("up", "down", "ps", …).
	Calls map[string]int
	// DownVolumes is true when the last down removed volumes (-v).
	DownVolumes bool
	// Images are the images the fake engine holds, as their references
	// ("nginx:1.27"), in the order they were learned.
	Images []string
	// Generation counts successful ups; it is part of every container ID, so an
	// unchanged Generation and Dir mean the same containers.
	Generation int
}

// Status returns the fake's state.
func (d *Docker) Status() (Status, error) {
	st, err := readStatus(d.State)
	if err != nil {
		return Status{}, fmt.Errorf("fakedocker: %w", err)
	}
	out := Status{Up: st.Up, Project: st.Project, Dir: st.Dir, Services: st.Services, Reads: st.PSCalls, Calls: st.Calls, DownVolumes: st.DownVolumes, Generation: st.Generation}
	for _, im := range st.Images {
		out.Images = append(out.Images, im.Ref)
	}
	return out, nil
}
