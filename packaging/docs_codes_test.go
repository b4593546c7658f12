package packaging_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// codeRow finds the code of a table row: "| `CODE` | …".
var codeRow = regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\|")

// tableCodes returns the codes of the table rows of a doc, in order.
func tableCodes(t *testing.T, doc string) []codes.Code {
	var out []codes.Code
	for _, m := range codeRow.FindAllStringSubmatch(readRepoFile(t, doc), -1) {
		out = append(out, codes.Code(m[1]))
	}
	return out
}

// TestOperationsNamesEveryCode checks that every stable code the agent can log, report
// or show in status (deployd/codes) has a row in docs/OPERATIONS.md, which tells the
// operator what to do, and that the doc names no code the agent does not have. Both
// follow the order of codes.All.
func TestOperationsNamesEveryCode(t *testing.T) {
	// CONFIG is a code of the OpenBao client alone: the agent reports a bad OpenBao
	// client config as CONFIG_INVALID. docs/PROTOCOL.md names it.
	want := slices.DeleteFunc(codes.All(), func(c codes.Code) bool { return c == codes.Config })
	assert.Equal(t, want, tableCodes(t, "docs/OPERATIONS.md"), "the code tables of docs/OPERATIONS.md")
	assert.Contains(t, tableCodes(t, "docs/PROTOCOL.md"), codes.Config, "docs/PROTOCOL.md has no table row for %s", codes.Config)
}

// TestBundleDocNamesEveryRefusal checks that the refusal table of docs/BUNDLE.md lists
// exactly the refusal codes, in the order of codes.Refusals.
func TestBundleDocNamesEveryRefusal(t *testing.T) {
	assert.Equal(t, codes.Refusals(), tableCodes(t, "docs/BUNDLE.md"))
}

// TestOperationsMetrics checks that docs/OPERATIONS.md lists exactly the metrics that
// internal/metrics writes.
func TestOperationsMetrics(t *testing.T) {
	src := readRepoFile(t, "internal/metrics/metrics.go")
	var code []string
	for _, m := range regexp.MustCompile(`(?:gauge|head)\("([a-z_]+)"`).FindAllStringSubmatch(src, -1) {
		code = append(code, "monky_deployd_"+m[1])
	}
	require.NotEmpty(t, code)
	var docs []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(monky_deployd_[a-z_]+)[{`]").FindAllStringSubmatch(readRepoFile(t, "docs/OPERATIONS.md"), -1) {
		docs = append(docs, m[1])
	}
	assert.ElementsMatch(t, code, docs)
}
