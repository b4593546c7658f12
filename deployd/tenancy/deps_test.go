package tenancy_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDependencies keeps the package's dependency budget (docs/ARCHITECTURE.md): the
// standard library, deployd/secret and the leaf packages deployd/codes and deployd/ids,
// nothing else.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	allowed := map[string]bool{
		"github.com/monky/monky-deployd/deployd/tenancy": true,
		"github.com/monky/monky-deployd/deployd/secret":  true,
		"github.com/monky/monky-deployd/deployd/codes":   true,
		"github.com/monky/monky-deployd/deployd/ids":     true,
	}
	for _, dep := range strings.Fields(string(out)) {
		assert.True(t, allowed[dep], "deployd/tenancy must not depend on %s", dep)
	}
}
