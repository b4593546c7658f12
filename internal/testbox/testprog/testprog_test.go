package testprog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

func TestMain(m *testing.M) { os.Exit(testprog.Run(m)) }

// TestKillReachesTheGroup: Kill ends the run and the children of its process group.
func TestKillReachesTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	p := testprog.Start(t, "/bin/sh", dir, nil, "-c", "sleep 60 & echo $! > "+pidFile+"; wait")
	testprog.WaitFor(t, 10*time.Second, "the child", func() bool {
		data, err := os.ReadFile(pidFile)
		return err == nil && strings.TrimSpace(string(data)) != ""
	})
	res := p.Kill()
	assert.Equal(t, -9, res.Code)
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	testprog.WaitFor(t, 10*time.Second, "the child to be gone", func() bool {
		_, err := os.Stat("/proc/" + strings.TrimSpace(string(data)))
		return os.IsNotExist(err)
	})
}

// TestRunResult: Wait returns the exit code and what the run printed.
func TestRunResult(t *testing.T) {
	res := testprog.Start(t, "/bin/sh", t.TempDir(), nil, "-c", "echo out; echo err >&2; exit 3").Wait(t, 10*time.Second)
	assert.Equal(t, 3, res.Code)
	assert.Equal(t, "out\n", res.Stdout)
	assert.Equal(t, "err\n", res.Stderr)
	assert.Equal(t, "out\nerr\n", res.Output())
}

// TestBuildOnce: a program is built once per set of flags.
func TestBuildOnce(t *testing.T) {
	a := testprog.Build(t, "github.com/monky/monky-deployd/test/engine/testapp")
	assert.Equal(t, a, testprog.Build(t, "github.com/monky/monky-deployd/test/engine/testapp"))
	assert.NotEqual(t, a, testprog.Build(t, "github.com/monky/monky-deployd/test/engine/testapp", "-trimpath"))
	st, err := os.Stat(a)
	require.NoError(t, err)
	assert.NotZero(t, st.Mode().Perm()&0o111)
}

// TestDeps: Deps lists a package with what it links, standard library included;
// NonStdDeps leaves the standard library out.
func TestDeps(t *testing.T) {
	deps := testprog.Deps(t, ".")
	assert.Contains(t, deps, "github.com/monky/monky-deployd/internal/testbox/testprog")
	assert.Contains(t, deps, "os/exec")
	assert.NotContains(t, deps, "github.com/stretchr/testify/assert", "the package's own deps, not its test's")
	assert.Equal(t, []string{"github.com/monky/monky-deployd/internal/testbox/testprog"}, testprog.NonStdDeps(t, "."))
}
