package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbiddenDeps are packages the agent binary must never link: test code and fakes
// (docs/ARCHITECTURE.md). A prefix ending in "/" forbids the whole tree.
var forbiddenDeps = []string{
	"testing",
	"testing/",
	"net/http/httptest",
	"github.com/stretchr/testify/",
	"github.com/monky/monky-deployd/internal/fakes/",
	"github.com/monky/monky-deployd/deployd/deploydtest",
	"github.com/monky/monky-deployd/deployd/deploydtest/",
	"github.com/monky/monky-deployd/internal/testbox",
	"github.com/monky/monky-deployd/internal/testbox/",
}

func forbidden(pkg string) bool {
	for _, f := range forbiddenDeps {
		if pkg == strings.TrimSuffix(f, "/") || strings.HasSuffix(f, "/") && strings.HasPrefix(pkg, f) {
			return true
		}
	}
	return false
}

// TestLinksNoTestCode: `go list -deps` of the agent holds no test package and no fake,
// and neither does the symbol table of the binary as built.
func TestLinksNoTestCode(t *testing.T) {
	goTool := testbox.GoTool(t)
	deps := testbox.Deps(t, ".")
	require.Contains(t, deps, "github.com/monky/monky-deployd/deployd", "the list is the agent's")
	require.Contains(t, deps, "github.com/monky/monky-deployd/cmd/monky-deployd")
	for _, d := range deps {
		assert.False(t, forbidden(d), "the agent binary links %s", d)
	}

	// The binary itself: no symbol of a forbidden package.
	syms, err := exec.Command(goTool, "tool", "nm", agentBinary(t)).Output()
	require.NoError(t, err)
	agentSyms := 0
	for _, line := range strings.Split(string(syms), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		name := f[len(f)-1]
		if strings.HasPrefix(name, "github.com/monky/monky-deployd/deployd.") {
			agentSyms++
		}
		for _, p := range []string{"testing.", "net/http/httptest.", "github.com/stretchr/testify/",
			"github.com/monky/monky-deployd/internal/fakes/", "github.com/monky/monky-deployd/deployd/deploydtest.",
			"github.com/monky/monky-deployd/deployd/deploydtest/", "github.com/monky/monky-deployd/internal/testbox.",
			"github.com/monky/monky-deployd/internal/testbox/"} {
			assert.False(t, strings.HasPrefix(name, p), "symbol %s in the binary", name)
		}
	}
	require.Positive(t, agentSyms, "go tool nm lists the agent's own symbols, so the scan sees the binary")
}

func TestForbidden(t *testing.T) {
	tests := map[string]bool{
		"testing":                             true,
		"testing/fstest":                      true,
		"testingx":                            false,
		"net/http/httptest":                   true,
		"net/http":                            false,
		"github.com/stretchr/testify/require": true,
		"github.com/monky/monky-deployd/deployd/deploydtest/fakebao":    true,
		"github.com/monky/monky-deployd/deployd/deploydtest/fakestack":  true,
		"github.com/monky/monky-deployd/internal/fakes/admin":           true,
		"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker": true,
		"github.com/monky/monky-deployd/deployd/deploydtest":            true,
		"github.com/monky/monky-deployd/internal/testbox":               true,
		"github.com/monky/monky-deployd/internal/testbox/testprog":      true,
		"github.com/monky/monky-deployd/deployd/bundle":                 false,
		"github.com/monky/monky-deployd/internal/fsutil":                false,
	}
	for pkg, want := range tests {
		t.Run(pkg, func(t *testing.T) { assert.Equal(t, want, forbidden(pkg)) })
	}
}
