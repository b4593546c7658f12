package transport

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// heavyDeps are the import path prefixes this package must not link: the OpenZiti
// SDK and its modules, whose package init runs in every program that links them (the
// sdk transport is in internal/transport/zititransport).
var heavyDeps = []string{"github.com/openziti/"}

// TestNoOpenZitiDeps: `go list -deps` of the package holds nothing of OpenZiti, so
// that a program building the proxy or system transport does not link the SDK.
func TestNoOpenZitiDeps(t *testing.T) {
	const self = "github.com/monky/monky-deployd/internal/transport"
	deps := testprog.Deps(t, self)
	require.Contains(t, deps, self, "the list is the package's")
	require.Contains(t, deps, "net/http")
	for _, d := range deps {
		for _, p := range heavyDeps {
			assert.False(t, strings.HasPrefix(d, p), "internal/transport links %s", d)
		}
	}
}
