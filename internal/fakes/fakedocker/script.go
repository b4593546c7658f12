package fakedocker

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// PS output shapes of docker compose ps --format json.
const (
	// PSLines is one JSON object per line, as compose 2.21 and later print it.
	PSLines = "lines"
	// PSArray is one JSON array, as compose 2.20 and earlier print it.
	PSArray = "array"
)

// DefaultServerVersion is the docker server version the fake reports when the script
// does not name one.
const DefaultServerVersion = "27.3.1"

// Script is the scripted compose behaviour read from FAKE_DOCKER_SCRIPT. The zero
// Script makes every command succeed. The package documentation describes the format.
type Script struct {
	// PSFormat is PSLines (the default) or PSArray.
	PSFormat string `json:"ps_format,omitempty"`
	// ServerVersion is what docker version reports as the server version.
	ServerVersion string `json:"server_version,omitempty"`
	// Commands scripts "up", "down", "ps", "logs", "version", "pull" and "image
	// inspect" by name.
	Commands map[string]Command `json:"commands,omitempty"`
	// Services adds services or overrides what the compose files say about them.
	Services map[string]Service `json:"services,omitempty"`
	// Releases scripts services of one release only: the key is the base name of the
	// project directory of up (the agent's release directory is the bundle sha), and
	// its services override Services while that release is up. A real engine's
	// behaviour depends on what the release runs; this is how the fake models it.
	Releases map[string]map[string]Service `json:"releases,omitempty"`
	// MissingImages are image references the fake registry does not have: docker
	// pull of one fails as the daemon does for a tag that does not exist.
	MissingImages []string `json:"missing_images,omitempty"`
	// DockerRootDir is the data root GET /info answers; default the directory of the
	// state file.
	DockerRootDir string `json:"docker_root_dir,omitempty"`
}

// Command scripts one command: output, exit code, delay and transient failures.
type Command struct {
	// Stdout is printed by a failing call, or before the normal output of a
	// successful one.
	Stdout string `json:"stdout,omitempty"`
	// Stderr is printed like Stdout, on standard error.
	Stderr string `json:"stderr,omitempty"`
	// Exit is the exit code of a failing call. Non-zero without FailTimes: every call fails.
	Exit int `json:"exit,omitempty"`
	// FailTimes makes only the first FailTimes calls fail (with Exit, or 1).
	FailTimes int `json:"fail_times,omitempty"`
	// Delay is slept before every call of the command.
	Delay Duration `json:"delay,omitempty"`
}

// Service scripts one compose service.
type Service struct {
	// Image is shown by ps; default the service's image in the compose files (or
	// "<project>-<service>" when it has none and compose would build it), else
	// "example.invalid/<service>:latest".
	Image string `json:"image,omitempty"`
	// ImageSize is the size in bytes of the service's image, as the fake engine's
	// GET /images/json reports it; 0 means DefaultImageSize.
	ImageSize int64 `json:"image_size,omitempty"`
	// Healthcheck, when set, overrides whether the service has a healthcheck.
	Healthcheck *bool `json:"healthcheck,omitempty"`
	// States are shown over successive ps calls after up; the last one repeats.
	// Empty means running (and healthy, with a healthcheck).
	States []State `json:"states,omitempty"`
	// Logs is what logs prints for the service, one line per line.
	Logs string `json:"logs,omitempty"`
}

// State is what ps shows for a service's container during one or more ps calls.
type State struct {
	// State is the docker container state; "" means "running".
	State string `json:"state,omitempty"`
	// Health is "", "starting", "healthy" or "unhealthy".
	Health string `json:"health,omitempty"`
	// ExitCode is the exit code of an exited or restarting container.
	ExitCode int `json:"exit_code,omitempty"`
	// Status overrides the generated status text ("Up 3 seconds (healthy)").
	Status string `json:"status,omitempty"`
	// HealthOutput is what the healthcheck printed, as docker inspect shows it in
	// State.Health.Log; default "ok" when healthy, "unhealthy" when not.
	HealthOutput string `json:"health_output,omitempty"`
	// RestartCount is docker inspect's RestartCount.
	RestartCount int `json:"restart_count,omitempty"`
	// Times is how many ps calls show this state; 0 counts as 1.
	Times int `json:"times,omitempty"`
}

// Duration is a time.Duration that reads and writes as a Go duration string ("2s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "1.5s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"2s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// WriteFile writes the script as JSON to path, for FAKE_DOCKER_SCRIPT.
func (s *Script) WriteFile(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadScript reads a script file. Unknown fields are an error, so that a typo in a
// test's script does not silently script nothing.
func ReadScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	switch s.PSFormat {
	case "", PSLines, PSArray:
	default:
		return nil, fmt.Errorf("script %s: ps_format %q: want %q or %q", path, s.PSFormat, PSLines, PSArray)
	}
	return &s, nil
}

// step returns the state shown by the n-th ps call (0-based) after up.
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
