package tenancy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestDependencies keeps the package's dependency budget (docs/ARCHITECTURE.md): the
// standard library, deployd/secret, the leaf packages deployd/codes and deployd/ids,
// internal/scrub and internal/errtext, nothing else.
func TestDependencies(t *testing.T) {
	allowed := map[string]bool{
		"github.com/monky/monky-deployd/deployd/tenancy": true,
		"github.com/monky/monky-deployd/deployd/secret":  true,
		"github.com/monky/monky-deployd/deployd/codes":   true,
		"github.com/monky/monky-deployd/deployd/ids":     true,
		// The one decision of how a server's text is made safe for an error, shared
		// with deployd/bao; standard library only.
		"github.com/monky/monky-deployd/internal/scrub": true,
		// The one decision of how an error's text is joined; standard library only.
		"github.com/monky/monky-deployd/internal/errtext": true,
	}
	for _, dep := range testprog.NonStdDeps(t, ".") {
		assert.True(t, allowed[dep], "deployd/tenancy must not depend on %s", dep)
	}
}
