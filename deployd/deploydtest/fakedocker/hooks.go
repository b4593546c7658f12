package fakedocker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Hook scripts `docker compose run` of one service: a hook of the agent
// (docs/BUNDLE.md, "Hooks"). Without one, a run of a defined service prints nothing
// and exits 0.
type Hook struct {
	// Stdout and Stderr are printed by every run.
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Exit is the exit code of a failing run (75: "try again later"). Non-zero
	// without FailTimes: every run fails.
	Exit int `json:"exit,omitempty"`
	// FailTimes makes only the first FailTimes runs fail (with Exit, or 1).
	FailTimes int `json:"fail_times,omitempty"`
	// Delay is a Go duration ("2s") slept before the run ends, so that a test can
	// let the run time out or kill the caller in it.
	Delay string `json:"delay,omitempty"`
	// Echo names variables of the project directory's .env whose "NAME=value" line
	// the run prints, as a hook that prints its environment would: a redaction test
	// puts a canary secret there.
	Echo []string `json:"echo,omitempty"`
}

// validate reports through bad every field of the hook of service name the fake
// would not play as meant.
func (h Hook) validate(name string, bad func(format string, args ...any)) {
	if h.Exit < 0 || h.FailTimes < 0 {
		bad("Hooks[%q]: Exit and FailTimes must not be negative", name)
	}
	if h.Delay != "" {
		if d, err := time.ParseDuration(h.Delay); err != nil || d < 0 {
			bad("Hooks[%q]: Delay %q: want a duration such as \"2s\"", name, h.Delay)
		}
	}
}

var runFlags = flagSpec{"--rm": false, "--no-deps": false, "-T": false, "--name": true}

// runHook is docker compose run --rm --no-deps -T --name NAME SERVICE: the service
// must be defined, and behind a profile the global --profile flags activate.
func (r *run) runHook(args []string) int {
	vals, pos, err := parseFlags("docker compose run", args, runFlags, true)
	if err != nil {
		return r.usage(err)
	}
	if len(pos) != 1 {
		return r.usage(usageError("run SERVICE without a command: the fake runs the service's own"))
	}
	if !has(vals, "--rm") || !has(vals, "--no-deps") || !has(vals, "-T") || last(vals, "--name") == "" {
		return r.usage(usageError("run without --rm, --no-deps, -T and --name: the agent's hooks never attach, start dependencies or leave containers"))
	}
	svc := pos[0]
	profiles, err := serviceProfiles(r.projectDir, r.files)
	if err != nil {
		return r.usage(err)
	}
	p, defined := profiles[svc]
	if !defined || len(p) > 0 && !slices.ContainsFunc(p, func(x string) bool { return slices.Contains(r.profiles, x) }) {
		fmt.Fprintf(r.stderr, "no such service: %s\n", svc)
		return 1
	}
	h := r.script.Hooks[svc]
	if d, _ := time.ParseDuration(h.Delay); d > 0 {
		time.Sleep(d)
	}
	code := 0
	err = lockedStatus(r.statePath, r.fresh, true, func(st *fakeState) error {
		if countCall(st, "run "+svc, Command{Exit: h.Exit, FailTimes: h.FailTimes}) {
			code = max(h.Exit, 1)
		}
		return nil
	})
	if err != nil {
		return r.usage(err)
	}
	fmt.Fprint(r.stdout, h.Stdout)
	fmt.Fprint(r.stderr, h.Stderr)
	r.echo(h.Echo)
	return code
}

// echo prints the "NAME=value" lines of the project directory's .env for names.
func (r *run) echo(names []string) {
	if len(names) == 0 {
		return
	}
	b, err := os.ReadFile(filepath.Join(r.projectDir, ".env"))
	if err != nil {
		fmt.Fprintf(r.stderr, "fake docker: %v\n", err)
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), "=")
		if slices.Contains(names, name) {
			fmt.Fprintln(r.stdout, sc.Text())
		}
	}
}

// rm is docker rm -f [--] NAME...: the fake keeps no hook container, so it removes
// nothing and says so as docker does.
func (r *run) rm(args []string) int {
	_, pos, err := parseFlags("docker rm", args, flagSpec{"-f": false, "--force": false}, false)
	if err != nil {
		return r.usage(err)
	}
	if len(pos) == 0 {
		return r.usage(usageError("docker rm needs a container"))
	}
	for _, name := range pos {
		fmt.Fprintf(r.stderr, "Error response from daemon: No such container: %s\n", name)
	}
	return 1
}
