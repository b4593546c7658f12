package packaging_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperationsNamesEveryFlag checks that docs/OPERATIONS.md names every flag of the
// agent binary and its usage-error exit code.
func TestOperationsNamesEveryFlag(t *testing.T) {
	src := readRepoFile(t, "cmd/monky-deployd/cli.go")
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	flags := regexp.MustCompile(`fs\.[A-Za-z0-9]+\("([a-z-]+)"`).FindAllStringSubmatch(src, -1)
	require.NotEmpty(t, flags)
	for _, m := range flags {
		assert.True(t, strings.Contains(ops, "--"+m[1]), "docs/OPERATIONS.md does not name monky-deployd's --%s", m[1])
	}
	assert.True(t, regexp.MustCompile(`(?m)^\| 2 \|`).MatchString(ops), "the exit code table has no row for 2 (a usage error)")
}
