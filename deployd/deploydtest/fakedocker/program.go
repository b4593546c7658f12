package fakedocker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The environment variables that name the record, state and script of a run; where
// a run's environment sets none, the paths come from configFile next to the program.
const (
	envLog    = "FAKE_DOCKER_LOG"
	envScript = "FAKE_DOCKER_SCRIPT"
	envState  = "FAKE_DOCKER_STATE"
)

// serveCommand is the first argument that makes the fake docker program serve its
// Engine API (serve) instead of playing a docker command. No docker command has this
// name, so the code under test cannot run it by mistake; its runs are not recorded.
const serveCommand = "serve-engine"

// fakeComposeVersion is the compose version the fake reports.
const fakeComposeVersion = "2.29.7"

// Main is the fake docker program: the main of cmd/fake-docker, and of any program or
// test binary that Install runs as docker (Options.Program), re-executed under the name
// docker — the helper-process pattern of os/exec's tests:
//
//	func main() { // or TestMain
//		if filepath.Base(os.Args[0]) == "docker" {
//			fakedocker.Main()
//		}
//		…
//	}
//
// It plays the docker command of os.Args, or serves the Engine API for `docker
// serve-engine` until stdin closes or SIGTERM or SIGINT (package doc), and exits the
// process with the command's exit code: Main never returns.
func Main() {
	exe, exeErr := os.Executable()
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		if exeErr != nil {
			fmt.Fprintf(os.Stderr, "fake docker: %v\n", exeErr)
			os.Exit(1)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := serve(ctx, exe, os.Args[2:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	var cfg config
	if exeErr == nil {
		var err error
		if cfg, err = configNextTo(exe); err != nil {
			fmt.Fprintf(os.Stderr, "fake docker: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(play(cfg, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// play is one run of the program: args are the arguments after its name and env its
// whole environment ("K=V"), whose variables win over the paths of cfg; it reads
// neither of the process's and returns the exit code.
func play(cfg config, args []string, env []string, stdout, stderr io.Writer) int {
	vars := envMap(env)
	cfg = cfg.withEnv(vars)
	dir, err := os.Getwd()
	if err != nil {
		dir = ""
	}
	if cfg.Log != "" {
		if err := appendCall(cfg.Log, Call{Argv: args, Dir: dir, Env: envNames(env), Time: time.Now().UTC()}); err != nil {
			fmt.Fprintf(stderr, "fake docker: recording the call in %s: %v\n", cfg.Log, err)
			return 1
		}
	}
	r := &run{stdout: stdout, stderr: stderr, cwd: dir, statePath: cfg.State}
	scriptPath := cfg.Script
	if _, err := os.Stat(scriptPath); vars[envScript] == "" && err != nil {
		scriptPath = "" // the configFile's script is read once it exists
	}
	if scriptPath != "" {
		s, err := readScript(scriptPath)
		if err != nil {
			fmt.Fprintf(stderr, "fake docker: %v\n", err)
			return 1
		}
		r.script = *s
	}
	return r.main(args)
}

// readCalls reads the record written to a FAKE_DOCKER_LOG file. A missing file is no
// calls. A last line without its newline is a call being written (or one a kill cut
// short) and is not read yet.
func readCalls(path string) ([]Call, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var calls []Call
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var c Call
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// appendCall writes one JSON line with a single write on an O_APPEND file, so that
// lines of concurrent calls never interleave.
func appendCall(path string, c Call) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v // the last one wins, as in os/exec
	}
	return m
}

func envNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// run is one invocation.
type run struct {
	stdout, stderr io.Writer
	cwd            string
	statePath      string
	script         Script

	// compose global flags
	project    string
	projectDir string
	files      []string
	profiles   []string
}

// usageError is a command line the fake does not understand.
type usageError string

func (e usageError) Error() string { return string(e) }

func (r *run) main(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(r.stderr, "fake docker: no command; want compose or version")
		return 1
	}
	cmd, ok := map[string]func([]string) int{
		"version": r.dockerVersion, "compose": r.compose, "inspect": r.inspect, "image": r.image, "pull": r.pull, "rm": r.rm,
	}[args[0]]
	if !ok {
		fmt.Fprintf(r.stderr, "fake docker: unknown command %q (the fake knows compose, inspect, image inspect, pull and version)\n", args[0])
		return 1
	}
	return cmd(args[1:])
}

// flagSpec lists a subcommand's flags: true when the flag takes a value.
type flagSpec map[string]bool

// parseFlags splits args into flag values and positional arguments. "--x=v" and
// "--x v" are both accepted; unknown flags are an error.
func parseFlags(cmd string, args []string, spec flagSpec, stopAtPositional bool) (map[string][]string, []string, error) {
	vals := map[string][]string{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if stopAtPositional {
				pos = append(pos, args[i:]...)
				break
			}
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		takes, ok := spec[name]
		if !ok {
			return nil, nil, usageError(fmt.Sprintf("unknown flag %s for %s", name, cmd))
		}
		switch {
		case takes && !hasVal:
			if i+1 >= len(args) {
				return nil, nil, usageError(fmt.Sprintf("flag %s for %s needs a value", name, cmd))
			}
			i++
			val = args[i]
		case !takes && hasVal:
			return nil, nil, usageError(fmt.Sprintf("flag %s for %s takes no value", name, cmd))
		}
		vals[name] = append(vals[name], val)
	}
	return vals, pos, nil
}

func has(vals map[string][]string, names ...string) bool {
	for _, n := range names {
		if _, ok := vals[n]; ok {
			return true
		}
	}
	return false
}

func last(vals map[string][]string, names ...string) string {
	v := ""
	for _, n := range names {
		if l := vals[n]; len(l) > 0 {
			v = l[len(l)-1]
		}
	}
	return v
}

var composeGlobals = flagSpec{
	"-p": true, "--project-name": true, "--project-directory": true,
	"-f": true, "--file": true, "--env-file": true, "--profile": true,
	"--ansi": true, "--progress": true, "--parallel": true, "--dry-run": false,
}

func (r *run) compose(args []string) int {
	vals, rest, err := parseFlags("docker compose", args, composeGlobals, true)
	if err != nil {
		return r.usage(err)
	}
	// r.cwd is absolute (os.Getwd) or "" (Join keeps it "")
	if r.projectDir = cmp.Or(last(vals, "--project-directory"), r.cwd); !filepath.IsAbs(r.projectDir) {
		r.projectDir = filepath.Join(r.cwd, r.projectDir)
	}
	r.project = cmp.Or(last(vals, "-p", "--project-name"), filepath.Base(r.projectDir))
	r.files = append(append([]string(nil), vals["-f"]...), vals["--file"]...)
	r.profiles = vals["--profile"]
	if len(vals["-f"]) > 0 && len(vals["--file"]) > 0 {
		return r.usage(usageError("mix of -f and --file: the fake keeps one form so that the order is known"))
	}
	if len(rest) == 0 {
		return r.usage(usageError("docker compose: no subcommand"))
	}
	sub, ok := map[string]func([]string) int{
		"up": r.up, "down": r.down, "ps": r.ps, "logs": r.logs, "version": r.composeVersion, "run": r.runHook,
	}[rest[0]]
	if !ok {
		return r.usage(usageError(fmt.Sprintf("unknown command \"docker compose %s\" (the fake knows up, down, ps, logs and version)", rest[0])))
	}
	return sub(rest[1:])
}

func (r *run) usage(err error) int {
	fmt.Fprintf(r.stderr, "fake docker: %v\n", err)
	return 1
}

// outcome is what a command prints and returns.
type outcome struct {
	stdout, stderr strings.Builder
	code           int
}

// do runs a command: its scripted delay, then, under the state lock, its scripted
// failure or its effect, then it prints the output.
func (r *run) do(name string, effect func(st *fakeState, out *outcome) error) int {
	cmd := r.script.Commands[name]
	if cmd.Delay > 0 {
		time.Sleep(cmd.Delay)
	}
	var out outcome
	err := lockedStatus(r.statePath, r.fresh, true, func(st *fakeState) error {
		out.stdout.WriteString(cmd.Stdout)
		out.stderr.WriteString(cmd.Stderr)
		if countCall(st, name, cmd) {
			out.code = max(cmd.Exit, 1)
			return nil
		}
		if cmd.FailTimes > 0 {
			// a recovered command prints its normal output only
			out.stdout.Reset()
			out.stderr.Reset()
		}
		return effect(st, &out)
	})
	if err != nil {
		fmt.Fprintf(r.stderr, "fake docker: %v\n", err)
		return 1
	}
	_, _ = io.WriteString(r.stdout, out.stdout.String())
	_, _ = io.WriteString(r.stderr, out.stderr.String())
	return out.code
}

// countCall counts a call of the scripted command name and says whether it fails:
// every call when Exit is set without FailTimes, else the first FailTimes calls. The
// docker program and the fake engine count the same calls.
func countCall(st *fakeState, name string, cmd Command) bool {
	if st.Calls == nil {
		st.Calls = map[string]int{}
	}
	n := st.Calls[name]
	st.Calls[name] = n + 1
	return (cmd.FailTimes == 0 && cmd.Exit != 0) || n < cmd.FailTimes
}

// fresh is the state of a call without a state file: the project is up.
func (r *run) fresh() fakeState {
	st := fakeState{Up: true, Project: r.project, Generation: 1, UpAt: time.Now().Add(-5 * time.Second).Unix()}
	if r.projectDir != "" {
		st.Services, st.Healthchecks, _, _ = projectFile(r.projectDir, r.files)
	}
	return st
}

func (r *run) dockerVersion(args []string) int {
	vals, pos, err := parseFlags("docker version", args, flagSpec{"-f": true, "--format": true}, false)
	if err != nil {
		return r.usage(err)
	}
	if len(pos) > 0 {
		return r.usage(usageError("docker version takes no arguments"))
	}
	return r.do("version", func(_ *fakeState, out *outcome) error {
		return versionOutput(out, last(vals, "-f", "--format"), cmp.Or(r.script.ServerVersion, DefaultServerVersion))
	})
}

func (r *run) composeVersion(args []string) int {
	vals, pos, err := parseFlags("docker compose version", args, flagSpec{"--short": false, "-f": true, "--format": true}, false)
	if err != nil {
		return r.usage(err)
	}
	if len(pos) > 0 {
		return r.usage(usageError("docker compose version takes no arguments"))
	}
	if has(vals, "--short") {
		fmt.Fprintln(r.stdout, fakeComposeVersion)
	} else {
		fmt.Fprintf(r.stdout, "Docker Compose version v%s\n", fakeComposeVersion)
	}
	return 0
}
