package fakedocker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
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
	PSFormat string `json:"ps_format,omitempty"`
	// ServerVersion is the docker server version of docker version and GET /version;
	// "" is DefaultServerVersion.
	ServerVersion string `json:"server_version,omitempty"`
	// Commands scripts commands by name (one of Commands()): failures, output and
	// delays.
	Commands map[string]Command `json:"commands,omitempty"`
	// Services adds services or overrides what the compose files say of them.
	Services map[string]Service `json:"services,omitempty"`
	// Releases scripts the services of one release only, keyed by the base name of
	// the compose project directory of up: the agent's release directories are named
	// by bundle sha, so Releases[sha] makes that release behave differently, e.g.
	// unhealthy while the release restored after it comes back healthy. While that
	// release is up, its services override Services.
	Releases map[string]map[string]Service `json:"releases,omitempty"`
	// MissingImages are image references the fake's registry does not have: docker
	// pull of one fails as the daemon does for a tag that does not exist ("manifest
	// for REF not found: manifest unknown"), which the agent reports as IMAGE_MISSING
	// before its lease. Any other reference pulls.
	MissingImages []string `json:"missing_images,omitempty"`
	// DockerRootDir is the data root the fake engine's GET /info names; "" is the
	// directory of the fake's state file.
	DockerRootDir string `json:"docker_root_dir,omitempty"`
	// Hooks scripts docker compose run of a service by name (the agent's hooks):
	// output, exit code, delay, and variables of the .env it prints.
	Hooks map[string]Hook `json:"hooks,omitempty"`
}

// Command scripts one command.
type Command struct {
	// Stdout is printed by a failing call, or before the normal output of a successful
	// one.
	Stdout string `json:"stdout,omitempty"`
	// Stderr is printed like Stdout, on standard error; a failing Engine API read
	// answers 500 with it.
	Stderr string `json:"stderr,omitempty"`
	// Exit is the exit code of a failing call. Non-zero without FailTimes: every call
	// fails.
	Exit int `json:"exit,omitempty"`
	// FailTimes makes only the first FailTimes calls fail (with Exit, or 1); later
	// calls behave normally.
	FailTimes int `json:"fail_times,omitempty"`
	// Delay is slept before every call, after it was recorded, so that a test can stop
	// the caller mid-call.
	Delay time.Duration `json:"-"`
}

// Service scripts one compose service.
type Service struct {
	// Image is the service's image; "": its image in the compose files, else
	// "<project>-<service>" (what compose names an image it builds).
	Image string `json:"image,omitempty"`
	// ImageSize is the image's size in bytes in GET /images/json; 0 is 10 MiB.
	ImageSize int64 `json:"image_size,omitempty"`
	// Healthcheck, when set, says whether the service has a healthcheck, whatever its
	// compose file says; unset, a service has one when its compose file declares one
	// or one of its States names a health.
	Healthcheck *bool `json:"healthcheck,omitempty"`
	// States are shown over successive reads after up (docker compose ps, or GET
	// /containers/json: the n-th read shows the n-th state, a state with Times k
	// counts k reads); the last one repeats. Empty: running (and healthy with a
	// healthcheck).
	States []State `json:"states,omitempty"`
	// Logs is what docker compose logs prints for the service.
	Logs string `json:"logs,omitempty"`
}

// State is what one or more reads show of a service's container.
type State struct {
	// State is the container state: "" (running), "running", "exited", "restarting",
	// "created", "paused" or "dead".
	State string `json:"state,omitempty"`
	// Health is "", "starting", "healthy" or "unhealthy"; shown only for a running
	// container with a healthcheck, as docker does.
	Health string `json:"health,omitempty"`
	// ExitCode is the exit code of an exited or restarting container.
	ExitCode int `json:"exit_code,omitempty"`
	// Status overrides docker's status text ("Up 3 seconds (healthy)").
	Status string `json:"status,omitempty"`
	// HealthOutput is the healthcheck's output in docker inspect's State.Health.Log;
	// "": "ok" when healthy, "unhealthy" when not.
	HealthOutput string `json:"health_output,omitempty"`
	// RestartCount is docker inspect's RestartCount; a count other than the last one
	// shown is a restart, after which the container's uptime is real time.
	RestartCount int `json:"restart_count,omitempty"`
	// Times is how many reads show this state; 0 counts as 1.
	Times int `json:"times,omitempty"`
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
	for _, name := range slices.Sorted(maps.Keys(s.Hooks)) {
		s.Hooks[name].validate(name, bad)
	}
	for _, rel := range slices.Sorted(maps.Keys(s.Releases)) {
		if rel == "" || strings.Contains(rel, "/") {
			bad("Releases[%q]: a release is the base name of a project directory (the bundle sha)", rel)
		}
		checkServices(fmt.Sprintf("Releases[%q]", rel), s.Releases[rel])
	}
	return errors.Join(errs...)
}

// commandJSON is Command in the script file, with Delay as a Go duration ("2s").
type commandJSON struct {
	plainCommand
	Delay string `json:"delay,omitempty"`
}

// plainCommand is Command without its JSON methods.
type plainCommand Command

// MarshalJSON writes c as the script file has it: delay as a Go duration string.
func (c Command) MarshalJSON() ([]byte, error) {
	j := commandJSON{plainCommand: plainCommand(c)}
	if c.Delay != 0 {
		j.Delay = c.Delay.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads c from the script file: delay is a Go duration string ("1.5s").
func (c *Command) UnmarshalJSON(b []byte) error {
	var j commandJSON
	if err := decodeStrict(b, &j); err != nil {
		return err
	}
	*c = Command(j.plainCommand)
	if j.Delay != "" {
		d, err := time.ParseDuration(j.Delay)
		if err != nil {
			return fmt.Errorf("delay %q: want a duration such as \"2s\": %w", j.Delay, err)
		}
		c.Delay = d
	}
	return nil
}

// writeFile replaces the script file at path with s atomically (a temporary file
// renamed over it), so that a call running meanwhile reads the old script or the new
// one, never half of one.
func (s *Script) writeFile(path string) error { return writeJSON(path, s, 0o644) }

// readScript reads a script file and validates it. Unknown fields are an error, so
// that a typo in a script does not silently script nothing.
func readScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Script
	if err := decodeStrict(b, &s); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	return &s, nil
}

// decodeStrict decodes the JSON b into v; an unknown field is an error.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// step returns the state shown by the n-th read (0-based) after up.
func (s Service) step(n int) State {
	if len(s.States) == 0 {
		return State{}
	}
	for _, st := range s.States {
		t := max(st.Times, 1)
		if n < t {
			return st
		}
		n -= t
	}
	return s.States[len(s.States)-1]
}
