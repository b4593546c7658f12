package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
)

// systemPluginDirs are the directories where the docker CLI looks for its plugins on
// Linux after $DOCKER_CONFIG/cli-plugins (docker/cli, cli-plugins/manager). A variable
// so that tests can point it elsewhere.
var systemPluginDirs = []string{
	"/usr/local/lib/docker/cli-plugins",
	"/usr/local/libexec/docker/cli-plugins",
	"/usr/lib/docker/cli-plugins",
	"/usr/libexec/docker/cli-plugins",
}

// composePluginDirs lists the directories the docker CLI searches for the compose
// plugin, in its order: the config's cliPluginsExtraDirs, $DOCKER_CONFIG/cli-plugins
// (default ~/.docker), then the system directories. env is the docker CLI's
// environment.
func composePluginDirs(env map[string]string) []string {
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
	return append(dirs, systemPluginDirs...)
}

// findComposePlugin returns the path of the first executable docker-compose plugin in
// dirs, or an error that names the directories searched. Compose v1 never was a CLI
// plugin, so a plugin there is compose v2. It execs nothing: the timer's idle tick
// stays free of subprocesses.
func findComposePlugin(dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, "docker-compose")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("no docker-compose plugin in " + strings.Join(dirs, ", "))
}

// checkCompose makes `run` fail at once, with a message that says what to install,
// on a box whose docker CLI has no compose v2: without it every apply would spend a
// lease and then fail at `docker compose up`. Only the plain `docker` of the default
// config is checked; a custom compose.docker (a wrapper, another path) is taken as is.
// It returns 0 or the exit code.
func (c *cli) checkCompose(cfg deployd.Config) int {
	if cfg.Compose.Docker != "docker" {
		return 0
	}
	if _, err := findComposePlugin(composePluginDirs(c.env)); err != nil {
		c.log.Error("docker compose v2 is not installed: install docker-compose-plugin (Docker's apt repository), "+
			"docker-compose-v2 (Ubuntu) or docker-compose 2.x (Debian 13); Debian 12's docker-compose 1.29 is not compose v2. "+
			"See 'Docker compose v2' in /usr/share/doc/monky-deployd/OPERATIONS.md",
			"code", codes.ComposeMissing, "err", err, "exit", deployd.ExitFailed)
		return deployd.ExitFailed
	}
	return 0
}
