package fakedocker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlayConfig: the paths of fake-docker.json serve where the environment sets none; a
// variable of the environment wins; the record names only what was received; a
// script named by the config is read once it exists.
func TestPlayConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := config{Log: filepath.Join(dir, "docker.log"), Script: filepath.Join(dir, "script.json")}
	require.NoError(t, cfg.writeFile(filepath.Join(dir, configFile)))
	back, err := configNextTo(filepath.Join(dir, "docker"))
	require.NoError(t, err)
	assert.Equal(t, cfg, back)

	version := func(env ...string) string {
		var out, errOut bytes.Buffer
		code := play(back, []string{"version", "--format", "{{.Server.Version}}"}, env, &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
		return out.String()
	}
	assert.Equal(t, DefaultServerVersion+"\n", version("PATH=/bin"), "no script yet: the default")
	require.NoError(t, (&Script{ServerVersion: "27.0.0"}).writeFile(cfg.Script))
	assert.Equal(t, "27.0.0\n", version("PATH=/bin"))

	other := filepath.Join(dir, "other.log")
	version(envLog + "=" + other)
	calls, err := readCalls(cfg.Log)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"PATH"}, calls[0].Env, "only what the program received")
	calls, err = readCalls(other)
	require.NoError(t, err)
	assert.Len(t, calls, 1, "FAKE_DOCKER_LOG wins over the config")
	_, err = os.Stat(cfg.Log + ".state")
	assert.NoError(t, err, "the state defaults to the log's")

	missing, err := readConfig(filepath.Join(dir, "none.json"))
	require.NoError(t, err)
	assert.Equal(t, config{}, missing)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600))
	_, err = readConfig(filepath.Join(dir, "bad.json"))
	assert.Error(t, err)
}

// TestReadCallsSkipsALineBeingWritten: a reader that comes while a call is being
// appended (or after a kill cut one short) sees the complete lines only; a broken
// complete line is an error that names the file and the line.
func TestReadCallsSkipsALineBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "docker.log")
	require.NoError(t, os.WriteFile(path, []byte(`{"argv":["version"]}`+"\n"+`{"argv":["compose","up`), 0o644))
	calls, err := readCalls(path)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"version"}, calls[0].Argv)

	require.NoError(t, os.WriteFile(path, []byte(`{"argv":["version"]}`+"\n"+`{"argv":`+"\n"), 0o644))
	_, err = readCalls(path)
	require.ErrorContains(t, err, "docker.log line 2")
}
