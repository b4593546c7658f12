package fakestack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestLinksNoTesting: the fakes, and the quickstart built on them, link neither
// "testing" nor an agent package they would stand in for (the fake tenancy hashes
// bundles with its own code, not deployd/bundle's).
func TestLinksNoTesting(t *testing.T) {
	for _, pkg := range []string{".", "../faketenancy", "../fakebao", "../../../examples/quickstart"} {
		deps := testprog.Deps(t, pkg)
		assert.NotContains(t, deps, "testing", "%s links testing", pkg)
		assert.NotContains(t, deps, "net/http/httptest", "%s links httptest", pkg)
		if pkg != "../../../examples/quickstart" {
			assert.NotContains(t, deps, "github.com/monky/monky-deployd/deployd/bundle", "%s links the agent's bundle package", pkg)
		}
	}
}
