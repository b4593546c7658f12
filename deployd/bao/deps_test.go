package bao_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestDependencies keeps the package's dependency budget (docs/ARCHITECTURE.md): of this
// module only deployd/secret, the leaf packages deployd/codes and deployd/ids,
// internal/scrub (the one decision of how a server's text is made safe for an error,
// shared with deployd/tenancy), internal/errtext (how an error's text is joined),
// internal/fsutil (how a file the config names is read);
// outside it vault/api's wire types and what they link, never
// OpenZiti nor test code.
func TestDependencies(t *testing.T) {
	const module = "github.com/monky/monky-deployd/"
	allowed := map[string]bool{
		module + "deployd/bao":      true,
		module + "deployd/secret":   true,
		module + "deployd/codes":    true,
		module + "deployd/ids":      true,
		module + "internal/scrub":   true,
		module + "internal/errtext": true,
		module + "internal/fsutil":  true,
	}
	forbidden := []string{"github.com/openziti/", "testing", "net/http/httptest", "github.com/stretchr/testify"}
	deps := testprog.Deps(t, ".")
	require.Contains(t, deps, "github.com/hashicorp/vault/api", "the listing is real")
	for _, dep := range deps {
		if strings.HasPrefix(dep, module) {
			assert.True(t, allowed[dep], "deployd/bao must not depend on %s", dep)
		}
		for _, bad := range forbidden {
			assert.False(t, dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/"),
				"deployd/bao must not depend on %s", dep)
		}
	}
}
