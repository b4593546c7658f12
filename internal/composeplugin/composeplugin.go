// Package composeplugin finds docker compose v2 the way the docker CLI does, without
// running anything: compose v2 is a CLI plugin, and a box without one would spend a
// lease on every apply and then fail at `docker compose up`. The agent binary checks it
// before a tick (cmd/monky-deployd).
package composeplugin

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// SystemDirs are the directories where the docker CLI looks for its plugins on Linux
// after $DOCKER_CONFIG/cli-plugins (docker/cli, cli-plugins/manager).
var SystemDirs = []string{
	"/usr/local/lib/docker/cli-plugins",
	"/usr/local/libexec/docker/cli-plugins",
	"/usr/lib/docker/cli-plugins",
	"/usr/libexec/docker/cli-plugins",
}

// Missing is what to tell an operator whose box has no compose v2.
const Missing = "docker compose v2 is not installed: install docker-compose-plugin (Docker's apt repository), " +
	"docker-compose-v2 (Ubuntu) or docker-compose 2.x (Debian 13); Debian 12's docker-compose 1.29 is not compose v2. " +
	"See 'Docker compose v2' in /usr/share/doc/monky-deployd/OPERATIONS.md"

// Dirs lists the directories the docker CLI searches for the compose
// plugin, in its order: the config's cliPluginsExtraDirs, $DOCKER_CONFIG/cli-plugins
// (default ~/.docker), then system (SystemDirs on a box). env is the docker CLI's
// environment.
func Dirs(env map[string]string, system []string) []string {
	configDir := env["DOCKER_CONFIG"]
	if configDir == "" && env["HOME"] != "" {
		configDir = filepath.Join(env["HOME"], ".docker")
	}
	var dirs []string
	if configDir != "" {
		if b, err := os.ReadFile(filepath.Join(configDir, "config.json")); err == nil {
			var cfg struct {
				Extra []string `json:"cliPluginsExtraDirs"`
			}
			if json.Unmarshal(b, &cfg) == nil {
				dirs = append(dirs, cfg.Extra...)
			}
		}
		dirs = append(dirs, filepath.Join(configDir, "cli-plugins"))
	}
	return append(dirs, system...)
}

// Find returns the path of the first executable docker-compose plugin in
// dirs, or an error that names the directories searched. Compose v1 never was a CLI
// plugin, so a plugin there is compose v2. It execs nothing: the timer's idle tick
// stays free of subprocesses.
func Find(dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, "docker-compose")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("no docker-compose plugin in " + strings.Join(dirs, ", "))
}
