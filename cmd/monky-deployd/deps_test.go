package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
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
	goTool := testprog.GoTool(t)
	deps := testprog.Deps(t, ".")
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
		assert.False(t, forbiddenSymbol(name), "symbol %s in the binary", name)
	}
	require.Positive(t, agentSyms, "go tool nm lists the agent's own symbols, so the scan sees the binary")
}

// forbiddenSymbol: name is a symbol of a forbidden package ("pkg.Name", or under a
// forbidden tree).
func forbiddenSymbol(name string) bool {
	for _, f := range forbiddenDeps {
		if strings.HasPrefix(name, strings.TrimSuffix(f, "/")+".") || strings.HasSuffix(f, "/") && strings.HasPrefix(name, f) {
			return true
		}
	}
	return false
}

func TestForbidden(t *testing.T) {
	const mod = "github.com/monky/monky-deployd/"
	for _, pkg := range []string{"testing", "testing/fstest", "net/http/httptest", "github.com/stretchr/testify/require",
		mod + "deployd/deploydtest/fakebao", mod + "deployd/deploydtest/fakestack", mod + "internal/fakes/admin",
		mod + "deployd/deploydtest/fakedocker", mod + "deployd/deploydtest", mod + "internal/testbox", mod + "internal/testbox/testprog"} {
		assert.True(t, forbidden(pkg), pkg)
	}
	for _, pkg := range []string{"testingx", "net/http", mod + "deployd/bundle", mod + "internal/fsutil"} {
		assert.False(t, forbidden(pkg), pkg)
	}
	for sym, want := range map[string]bool{"testing.tRunner": true, "testingx.F": false, mod + "internal/testbox/testprog.Build": true,
		mod + "internal/testbox/golden.Assert": true, mod + "deployd/deploydtest/fakedocker.New": true, mod + "deployd.New": false} {
		assert.Equal(t, want, forbiddenSymbol(sym), sym)
	}
}
