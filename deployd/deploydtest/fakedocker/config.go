package fakedocker

import (
	"cmp"
	"os"
	"path/filepath"
)

// configFile is the file next to the fake docker program that names its record, state
// and script where its environment does not (package doc, "Without the variables").
const configFile = "fake-docker.json"

// config is the content of configFile.
type config struct {
	// Log is the record file (FAKE_DOCKER_LOG).
	Log string `json:"log,omitempty"`
	// State is the state file (FAKE_DOCKER_STATE); "": Log + ".state".
	State string `json:"state,omitempty"`
	// Script is the script file (FAKE_DOCKER_SCRIPT). It is read only when it exists,
	// so that a test can put a script in place later.
	Script string `json:"script,omitempty"`
}

// withEnv is c with the paths vars (the environment) sets instead, and State
// defaulting to Log + ".state".
func (c config) withEnv(vars map[string]string) config {
	c = config{Log: cmp.Or(vars[envLog], c.Log), State: cmp.Or(vars[envState], c.State), Script: cmp.Or(vars[envScript], c.Script)}
	if c.State == "" && c.Log != "" {
		c.State = c.Log + ".state"
	}
	return c
}

// readConfig reads a configFile. A missing file is the zero config.
func readConfig(path string) (config, error) { return readJSON[config](path, "") }

// configNextTo reads the configFile in the directory of the program exe.
func configNextTo(exe string) (config, error) {
	return readConfig(filepath.Join(filepath.Dir(exe), configFile))
}

// writeFile writes c as JSON to path.
func (c config) writeFile(path string) error { return writeJSON(path, c, 0o644) }

// placeProgram puts the fake docker program src at dst: a hard link where the file
// system allows it, a copy otherwise, never a symlink (os.Executable resolves it to the
// target's directory, away from its configFile).
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
