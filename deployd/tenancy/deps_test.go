package tenancy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestDependencies keeps the package's dependency budget (docs/ARCHITECTURE.md): the
// standard library, deployd/secret and the leaf packages deployd/codes and deployd/ids,
// nothing else.
func TestDependencies(t *testing.T) {
	allowed := map[string]bool{
		"github.com/monky/monky-deployd/deployd/tenancy": true,
		"github.com/monky/monky-deployd/deployd/secret":  true,
		"github.com/monky/monky-deployd/deployd/codes":   true,
		"github.com/monky/monky-deployd/deployd/ids":     true,
	}
	for _, dep := range testprog.NonStdDeps(t, ".") {
		assert.True(t, allowed[dep], "deployd/tenancy must not depend on %s", dep)
	}
}
