package main

import (
	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/composeplugin"
)

// systemPluginDirs are composeplugin.SystemDirs, a variable of this package so that
// tests can point it elsewhere.
var systemPluginDirs = composeplugin.SystemDirs

// composePluginDirs lists the directories the docker CLI searches for the compose
// plugin, in its order (composeplugin.Dirs).
func composePluginDirs(env map[string]string) []string {
	return composeplugin.Dirs(env, systemPluginDirs)
}

// findComposePlugin is composeplugin.Find.
func findComposePlugin(dirs []string) (string, error) { return composeplugin.Find(dirs) }

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
		c.log.Error(composeplugin.Missing,
			"code", codes.ComposeMissing, "err", err, "exit", deployd.ExitFailed)
		return deployd.ExitFailed
	}
	return 0
}
