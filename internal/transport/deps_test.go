package transport

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heavyDeps are the import path prefixes this package must not link: the OpenZiti
// SDK and its modules, whose package init runs in every program that links them (the
// sdk transport is in internal/transport/zititransport).
var heavyDeps = []string{"github.com/openziti/"}

// TestNoOpenZitiDeps: `go list -deps` of the package holds nothing of OpenZiti, so
// that a program building the proxy or system transport does not link the SDK.
func TestNoOpenZitiDeps(t *testing.T) {
	const self = "github.com/monky/monky-deployd/internal/transport"
	out, err := exec.CommandContext(t.Context(), goTool(t), "list", "-deps", self).Output()
	require.NoError(t, err, "go list -deps: %s", stderrOf(err))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, self, "the list is the package's")
	require.Contains(t, deps, "net/http")
	for _, d := range deps {
		for _, p := range heavyDeps {
			assert.False(t, strings.HasPrefix(d, p), "internal/transport links %s", d)
		}
	}
}

// goTool finds the go tool: the one on PATH (go test puts its own there), else the
// one under $GOROOT. (internal/testbox.GoTool would do, but importing it here is an
// import cycle: it links the agent, which links this package.)
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no go tool on PATH or under $GOROOT")
	return ""
}

// stderrOf returns the standard error of a failed command, if any.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
