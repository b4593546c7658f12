package fakedocker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ConfigFile is the file next to the fake docker program (in the same directory as the
// executable, found with os.Executable) that tells it where its record, state and
// script are. The agent gives docker compose only the variables docker itself reads
// (deployd.DockerEnv), never FAKE_DOCKER_*, so a fake docker run by the agent binary
// learns its paths from this file; a variable of its environment still wins. Put the
// program in place as a copy or a hard link, not a symlink: os.Executable resolves a
// symlink to its target's directory.
const ConfigFile = "fake-docker.json"

// Config is the content of ConfigFile: the paths of FAKE_DOCKER_LOG,
// FAKE_DOCKER_STATE and FAKE_DOCKER_SCRIPT, for when the environment does not set
// them.
type Config struct {
	// Log is the record file (FAKE_DOCKER_LOG).
	Log string `json:"log,omitempty"`
	// State is the state file (FAKE_DOCKER_STATE); "": Log + ".state".
	State string `json:"state,omitempty"`
	// Script is the script file (FAKE_DOCKER_SCRIPT). It is read only when it exists,
	// so that a test can put a script in place later.
	Script string `json:"script,omitempty"`
}

// ReadConfig reads a ConfigFile. A missing file is the zero Config.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, err
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ConfigNextTo reads the ConfigFile in the directory of the program exe.
func ConfigNextTo(exe string) (Config, error) {
	return ReadConfig(filepath.Join(filepath.Dir(exe), ConfigFile))
}

// WriteFile writes c as JSON to path.
func (c Config) WriteFile(path string) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// PlaceProgram puts the fake docker program src at dst, where it will find the
// ConfigFile beside it: a hard link where the file system allows it, a copy
// otherwise, never a symlink (os.Executable resolves it to the target's directory).
func PlaceProgram(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}
