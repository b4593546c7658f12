package fakedocker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

// The shapes of `docker compose ps --format json`, for Script.PSFormat.
const (
	// PSLines is one JSON object per line, as compose 2.21 and later print it (the
	// default).
	PSLines = "lines"
	// PSArray is one JSON array, as compose 2.20 and earlier print it.
	PSArray = "array"
)

// DefaultServerVersion is the docker server version the fake reports when the script
// names none.
const DefaultServerVersion = "27.3.1"

// Commands lists the names Script.Commands takes: the fake's commands up, down, ps,
// logs, inspect, version (docker version), pull (docker pull) and "image inspect".
// The Engine API plays version, ps and inspect for GET /version, /containers/json and
// /containers/{id}/json too.
func Commands() []string {
	return []string{"up", "down", "ps", "logs", "inspect", "version", "pull", "image inspect"}
}

// Script is the fake docker's scripted compose behaviour. The zero Script (or a nil
// one) makes every command succeed, with every service running and, where its compose
// file declares a healthcheck, healthy.
type Script struct {
	// PSFormat is PSLines ("", the default) or PSArray.
	PSFormat string
	// ServerVersion is the docker server version of docker version and GET /version;
	// "" is DefaultServerVersion.
	ServerVersion string
	// Commands scripts commands by name (one of Commands()): failures, output and
	// delays.
	Commands map[string]Command
	// Services adds services or overrides what the compose files say of them.
	Services map[string]Service
	// Releases scripts the services of one release only, keyed by the base name of
	// the compose project directory of up: the agent's release directories are named
	// by bundle sha, so Releases[sha] makes that release behave differently, e.g.
	// unhealthy while the release restored after it comes back healthy. While that
	// release is up, its services override Services.
	Releases map[string]map[string]Service
	// MissingImages are image references the fake's registry does not have: docker
	// pull of one fails as the daemon does for a tag that does not exist ("manifest
	// for REF not found: manifest unknown"), which the agent reports as IMAGE_MISSING
	// before its lease. Any other reference pulls.
	MissingImages []string
	// DockerRootDir is the data root the fake engine's GET /info names; "" is the
	// directory of the fake's state file.
	DockerRootDir string
}

// Command scripts one command.
type Command struct {
	// Stdout is printed by a failing call, or before the normal output of a successful
	// one.
	Stdout string
	// Stderr is printed like Stdout, on standard error; a failing Engine API read
	// answers 500 with it.
	Stderr string
	// Exit is the exit code of a failing call. Non-zero without FailTimes: every call
	// fails.
	Exit int
	// FailTimes makes only the first FailTimes calls fail (with Exit, or 1); later
	// calls behave normally.
	FailTimes int
	// Delay is slept before every call, after it was recorded, so that a test can stop
	// the caller mid-call.
	Delay time.Duration
}

// Service scripts one compose service.
type Service struct {
	// Image is the service's image; "": its image in the compose files, else
	// "<project>-<service>" (what compose names an image it builds).
	Image string
	// ImageSize is the image's size in bytes in GET /images/json; 0 is 10 MiB.
	ImageSize int64
	// Healthcheck, when set, says whether the service has a healthcheck, whatever its
	// compose file says.
	Healthcheck *bool
	// States are shown over successive reads after up (docker compose ps, or GET
	// /containers/json: the n-th read shows the n-th state, a state with Times k
	// counts k reads); the last one repeats. Empty: running (and healthy with a
	// healthcheck).
	States []State
	// Logs is what docker compose logs prints for the service.
	Logs string
}

// State is what one or more reads show of a service's container.
type State struct {
	// State is the container state: "" (running), "running", "exited", "restarting",
	// "created", "paused" or "dead".
	State string
	// Health is "", "starting", "healthy" or "unhealthy"; shown only for a running
	// container with a healthcheck, as docker does.
	Health string
	// ExitCode is the exit code of an exited or restarting container.
	ExitCode int
	// Status overrides docker's status text ("Up 3 seconds (healthy)").
	Status string
	// HealthOutput is the healthcheck's output in docker inspect's State.Health.Log;
	// "": "ok" when healthy, "unhealthy" when not.
	HealthOutput string
	// RestartCount is docker inspect's RestartCount; a count other than the last one
	// shown is a restart, after which the container's uptime is real time.
	RestartCount int
	// Times is how many reads show this state; 0 counts as 1.
	Times int
}

var (
	containerStates = []string{"", "running", "exited", "restarting", "created", "paused", "dead"}
	healthStates    = []string{"", "starting", "healthy", "unhealthy"}
)

// Validate reports every field of s the fake would not play as meant, by its path
// (`Commands["upp"]: not a command …`), or nil.
func (s *Script) Validate() error {
	if s == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch s.PSFormat {
	case "", PSLines, PSArray:
	default:
		bad("PSFormat %q: want %q or %q", s.PSFormat, PSLines, PSArray)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Commands)) {
		c := s.Commands[name]
		if !slices.Contains(Commands(), name) {
			bad("Commands[%q]: not a command of the fake (%s)", name, strings.Join(Commands(), ", "))
		}
		if c.Exit < 0 || c.FailTimes < 0 || c.Delay < 0 {
			bad("Commands[%q]: Exit, FailTimes and Delay must not be negative", name)
		}
	}
	checkServices := func(where string, svcs map[string]Service) {
		for _, name := range slices.Sorted(maps.Keys(svcs)) {
			svc := svcs[name]
			at := fmt.Sprintf("%s[%q]", where, name)
			if name == "" {
				bad("%s: a service needs a name", at)
			}
			if svc.ImageSize < 0 {
				bad("%s: ImageSize must not be negative", at)
			}
			for i, st := range svc.States {
				if !slices.Contains(containerStates, st.State) {
					bad("%s.States[%d]: State %q: want one of %s", at, i, st.State, strings.Join(containerStates[1:], ", "))
				}
				if !slices.Contains(healthStates, st.Health) {
					bad("%s.States[%d]: Health %q: want one of %s", at, i, st.Health, strings.Join(healthStates[1:], ", "))
				}
				if st.Times < 0 || st.RestartCount < 0 {
					bad("%s.States[%d]: Times and RestartCount must not be negative", at, i)
				}
			}
		}
	}
	if s.DockerRootDir != "" && !strings.HasPrefix(s.DockerRootDir, "/") {
		bad("DockerRootDir %q: want an absolute path", s.DockerRootDir)
	}
	for i, ref := range s.MissingImages {
		if ref == "" || strings.ContainsAny(ref, " \t\n") {
			bad("MissingImages[%d] %q: want an image reference", i, ref)
		}
	}
	checkServices("Services", s.Services)
	for _, rel := range slices.Sorted(maps.Keys(s.Releases)) {
		if rel == "" || strings.Contains(rel, "/") {
			bad("Releases[%q]: a release is the base name of a project directory (the bundle sha)", rel)
		}
		checkServices(fmt.Sprintf("Releases[%q]", rel), s.Releases[rel])
	}
	return errors.Join(errs...)
}

// internal is s in the fake's own types (what it reads from its script file).
func (s *Script) internal() *fakedocker.Script {
	out := &fakedocker.Script{PSFormat: s.PSFormat, ServerVersion: s.ServerVersion,
		MissingImages: slices.Clone(s.MissingImages), DockerRootDir: s.DockerRootDir}
	if s.Commands != nil {
		out.Commands = map[string]fakedocker.Command{}
		for name, c := range s.Commands {
			out.Commands[name] = fakedocker.Command{Stdout: c.Stdout, Stderr: c.Stderr, Exit: c.Exit, FailTimes: c.FailTimes, Delay: fakedocker.Duration(c.Delay)}
		}
	}
	out.Services = internalServices(s.Services)
	if s.Releases != nil {
		out.Releases = map[string]map[string]fakedocker.Service{}
		for rel, svcs := range s.Releases {
			out.Releases[rel] = internalServices(svcs)
		}
	}
	return out
}

func internalServices(svcs map[string]Service) map[string]fakedocker.Service {
	if svcs == nil {
		return nil
	}
	out := map[string]fakedocker.Service{}
	for name, svc := range svcs {
		is := fakedocker.Service{Image: svc.Image, ImageSize: svc.ImageSize, Logs: svc.Logs}
		if svc.Healthcheck != nil {
			hc := *svc.Healthcheck
			is.Healthcheck = &hc
		}
		for _, st := range svc.States {
			is.States = append(is.States, fakedocker.State{
				State: st.State, Health: st.Health, ExitCode: st.ExitCode, Status: st.Status,
				HealthOutput: st.HealthOutput, RestartCount: st.RestartCount, Times: st.Times,
			})
		}
		out[name] = is
	}
	return out
}
