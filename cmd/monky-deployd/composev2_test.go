package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// plugin writes an executable docker-compose into dir.
func plugin(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "docker-compose"), []byte("#!/bin/sh\n"), mode))
}

func TestComposePluginDirs(t *testing.T) {
	sys := []string{"/sys-a", "/sys-b"}
	old := systemPluginDirs
	systemPluginDirs = sys
	t.Cleanup(func() { systemPluginDirs = old })

	home := t.TempDir()
	assert.Equal(t, []string{filepath.Join(home, ".docker", "cli-plugins"), "/sys-a", "/sys-b"},
		composePluginDirs(map[string]string{"HOME": home}), "HOME/.docker without DOCKER_CONFIG")
	cfgDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"cliPluginsExtraDirs":["/extra"]}`), 0o600))
	assert.Equal(t, []string{"/extra", filepath.Join(cfgDir, "cli-plugins"), "/sys-a", "/sys-b"},
		composePluginDirs(map[string]string{"HOME": home, "DOCKER_CONFIG": cfgDir}), "DOCKER_CONFIG wins, extra dirs first")
	assert.Equal(t, sys, composePluginDirs(map[string]string{}), "no HOME, no DOCKER_CONFIG")
}

func TestFindComposePlugin(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	_, err := findComposePlugin([]string{a, b})
	require.Error(t, err)
	assert.Contains(t, err.Error(), a+", "+b, "the error names every directory searched")

	plugin(t, a, 0o644)
	_, err = findComposePlugin([]string{a, b})
	assert.Error(t, err, "a file that is not executable is no plugin")

	require.NoError(t, os.MkdirAll(filepath.Join(b, "docker-compose"), 0o755))
	_, err = findComposePlugin([]string{b})
	assert.Error(t, err, "a directory is no plugin")

	c := t.TempDir()
	plugin(t, c, 0o755)
	p, err := findComposePlugin([]string{a, b, c})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(c, "docker-compose"), p)
}

// TestRunWithoutComposeV2: with compose.docker left at "docker" and no compose plugin
// where the docker CLI looks, run fails with COMPOSE_MISSING and exit 1 before it
// touches the network; with the plugin in DOCKER_CONFIG/cli-plugins it runs the tick.
func TestRunWithoutComposeV2(t *testing.T) {
	old := systemPluginDirs
	systemPluginDirs = []string{filepath.Join(t.TempDir(), "none")}
	t.Cleanup(func() { systemPluginDirs = old })

	b := newBox(t, boxOpts{})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	cfg := readFile(t, b.CfgPath)
	plain := strings.Replace(string(cfg), "  docker: "+b.Docker.Path+"\n", "  docker: docker\n", 1)
	require.NotEqual(t, string(cfg), plain)
	require.NoError(t, os.WriteFile(b.CfgPath, []byte(plain), 0o600))
	dockerConfig := t.TempDir()
	env := b.procEnv("DOCKER_CONFIG="+dockerConfig, "JOURNAL_STREAM=8:1")

	for _, args := range [][]string{{"run", "--config", b.CfgPath}, {"run", "--loop", "--config", b.CfgPath}} {
		r := runMain(t, env, args...)
		assert.Equal(t, deployd.ExitFailed, r.Code, args)
		assert.Contains(t, r.Stderr, "<3>", "an error in the journal")
		assert.Contains(t, r.Stderr, "code="+string(codes.ComposeMissing))
		assert.Contains(t, r.Stderr, "docker-compose-plugin")
		assert.Contains(t, r.Stderr, filepath.Join(dockerConfig, "cli-plugins"), "the message names where it looked")
	}
	assert.Empty(t, b.Stack.Tenancy.Requests(), "no check-in without compose v2")
	assert.Empty(t, b.Stack.Bao.Requests())
	assert.Empty(t, b.DockerCalls(""), "the check execs nothing")

	plugin(t, filepath.Join(dockerConfig, "cli-plugins"), 0o755)
	r := runMain(t, env, "run", "--config", b.CfgPath)
	assert.Equal(t, deployd.ExitOK, r.Code, r.Stderr)
	assert.NotContains(t, r.Stderr, string(codes.ComposeMissing))
	assert.NotEmpty(t, b.Stack.Tenancy.Requests())

	// A custom compose.docker is taken as is.
	require.NoError(t, os.WriteFile(b.CfgPath, cfg, 0o600))
	require.NoError(t, os.RemoveAll(filepath.Join(dockerConfig, "cli-plugins")))
	r = runMain(t, env, "run", "--config", b.CfgPath)
	assert.Equal(t, deployd.ExitOK, r.Code, r.Stderr)
}
