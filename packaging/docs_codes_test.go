package packaging_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// codeDecl finds the stable codes declared in Go source: `CodeX = "X"`, `CodeX Code =
// "X"` and the OpenBao client's `&kind{"X", …}`.
var codeDecl = regexp.MustCompile(`(?m)(?:\bCode\w*(?: Code)? *= *"([A-Z][A-Z0-9_]*)"|&kind\{"([A-Z][A-Z0-9_]*)")`)

// TestOperationsNamesEveryCode checks that every stable code the agent can log, report
// or show in status has a row in docs/OPERATIONS.md, which tells the operator what to do.
func TestOperationsNamesEveryCode(t *testing.T) {
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	rows := map[string]bool{}
	rowCode := regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\|")
	for _, m := range rowCode.FindAllStringSubmatch(ops, -1) {
		rows[m[1]] = true
	}
	dirs := []string{"deployd", "deployd/bao", "deployd/bundle", "deployd/tenancy", "deployd/compose",
		"internal/transport", "internal/composecheck"}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range codeDecl.FindAllStringSubmatch(string(b), -1) {
				code := m[1] + m[2]
				// bao's CONFIG is a code of the package alone: the agent reports a bad
				// OpenBao client config as CONFIG_INVALID (docs/PROTOCOL.md).
				if dir == "deployd/bao" && code == "CONFIG" {
					continue
				}
				assert.True(t, rows[code], "%s declares code %s; docs/OPERATIONS.md has no table row for it", f, code)
			}
		}
	}
}

// TestOperationsMetrics checks that docs/OPERATIONS.md lists exactly the metrics that
// internal/metrics writes.
func TestOperationsMetrics(t *testing.T) {
	src := readRepoFile(t, "internal/metrics/metrics.go")
	var code []string
	for _, m := range regexp.MustCompile(`gauge\("([a-z_]+)"`).FindAllStringSubmatch(src, -1) {
		code = append(code, "monky_deployd_"+m[1])
	}
	require.NotEmpty(t, code)
	var docs []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(monky_deployd_[a-z_]+)[{`]").FindAllStringSubmatch(readRepoFile(t, "docs/OPERATIONS.md"), -1) {
		docs = append(docs, m[1])
	}
	assert.ElementsMatch(t, code, docs)
}
