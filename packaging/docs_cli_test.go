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

// TestOperationsNamesEveryKitOption checks that docs/OPERATIONS.md names every option
// of install.sh.
func TestOperationsNamesEveryKitOption(t *testing.T) {
	kit := readRepoFile(t, "packaging/install.sh")
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	opts := regexp.MustCompile(`(?m)^\t(--[a-z-]+)\)`).FindAllStringSubmatch(kit, -1)
	require.NotEmpty(t, opts)
	for _, m := range opts {
		named := regexp.MustCompile(regexp.QuoteMeta(m[1]) + `\b`).MatchString(ops)
		assert.True(t, named, "docs/OPERATIONS.md does not name install.sh's %s", m[1])
	}
}
