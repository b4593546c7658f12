package fakedockertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

func TestInstall(t *testing.T) {
	d := Install(t, &Script{ServerVersion: "26.1.4"})
	assert.Equal(t, "docker", filepath.Base(d.Path))
	assert.Equal(t, d.Dir, filepath.Dir(d.Path))

	run := func(args ...string) string {
		// The fake by its path: a machine without docker has none in PATH to find,
		// and one with docker has the real one there.
		cmd := exec.Command(d.Path, args...)
		cmd.Env = d.Env()
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	assert.Equal(t, "26.1.4\n", run("version", "--format", "{{.Server.Version}}"))
	d.SetScript(&Script{ServerVersion: "27.0.0"})
	assert.Equal(t, "27.0.0\n", run("version", "--format", "{{.Server.Version}}"))

	calls := d.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"version", "--format", "{{.Server.Version}}"}, calls[0].Argv)
	assert.Equal(t, []string{"DOCKER_HOST", fakedocker.EnvLog, fakedocker.EnvScript, fakedocker.EnvState, "PATH"}, calls[0].Env)
	assert.Contains(t, d.Env(), "DOCKER_HOST=unix://"+d.Socket)
	assert.LessOrEqual(t, len(d.Socket), 107, "a unix socket path fits sun_path")
	assert.Equal(t, 2, d.Status().Calls["version"])

	again := Install(t, nil)
	built, err := os.Stat(filepath.Join(buildDir, "docker"))
	require.NoError(t, err)
	for _, p := range []string{d.Path, again.Path} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.True(t, os.SameFile(built, fi), "built once per test process: %s is a link to the one build", p)
	}
	assert.NotEqual(t, d.Dir, again.Dir, "each Install has its own program directory")
	assert.NotEqual(t, d.Log, again.Log, "each Install has its own record")
	assert.Empty(t, again.Script)
	assert.Empty(t, again.Calls())
}

// TestInstallWithoutTheVariables: a program that gives the fake docker only PATH (the
// agent binary does) still reaches the Docker's record, state and script, through the
// fakedocker.ConfigFile next to the program; the record names only what it received.
func TestInstallWithoutTheVariables(t *testing.T) {
	d := Install(t, nil)
	run := func(args ...string) string {
		cmd := exec.Command(d.Path, args...) // by its path, as above
		cmd.Env = []string{"PATH=" + d.Dir}
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	run("version")
	d.SetScript(&Script{ServerVersion: "27.0.0"}) // a script put in place later is read
	assert.Equal(t, "27.0.0\n", run("version", "--format", "{{.Server.Version}}"))
	calls := d.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"PATH"}, calls[0].Env)
	assert.Equal(t, 2, d.Status().Calls["version"])
}

// TestBinaryLinksNoTesting: the fake docker program never links the testing package.
func TestBinaryLinksNoTesting(t *testing.T) {
	for _, dep := range testprog.Deps(t, "github.com/monky/monky-deployd/cmd/fake-docker") {
		assert.NotEqual(t, "testing", dep)
		assert.NotContains(t, dep, "fakedockertest")
	}
}
