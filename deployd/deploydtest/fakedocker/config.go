package fakedocker

import (
	"os"
	"path/filepath"
)

// configFile is the file next to the fake docker program (in the same directory as the
// executable, found with os.Executable) that tells it where its record, state and
// script are. The agent gives docker compose only the variables docker itself reads
// (deployd.DockerEnv), never FAKE_DOCKER_*, so a fake docker run by the agent binary
// learns its paths from this file; a variable of its environment still wins. Put the
// program in place as a copy or a hard link, not a symlink: os.Executable resolves a
// symlink to its target's directory.
const configFile = "fake-docker.json"

// config is the content of configFile: the paths of FAKE_DOCKER_LOG,
// FAKE_DOCKER_STATE and FAKE_DOCKER_SCRIPT, for when the environment does not set
// them.
type config struct {
	// Log is the record file (FAKE_DOCKER_LOG).
	Log string `json:"log,omitempty"`
	// State is the state file (FAKE_DOCKER_STATE); "": Log + ".state".
	State string `json:"state,omitempty"`
	// Script is the script file (FAKE_DOCKER_SCRIPT). It is read only when it exists,
	// so that a test can put a script in place later.
	Script string `json:"script,omitempty"`
}

// readConfig reads a configFile. A missing file is the zero config.
func readConfig(path string) (config, error) { return readJSON[config](path, "") }

// configNextTo reads the configFile in the directory of the program exe.
func configNextTo(exe string) (config, error) {
	return readConfig(filepath.Join(filepath.Dir(exe), configFile))
}

// writeFile writes c as JSON to path.
func (c config) writeFile(path string) error { return writeJSON(path, c, 0o644) }

// placeProgram puts the fake docker program src at dst, where it will find the
// configFile beside it: a hard link where the file system allows it, a copy
// otherwise, never a symlink (os.Executable resolves it to the target's directory).
func placeProgram(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}
