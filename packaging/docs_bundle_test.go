package packaging_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBundleDocReservedNames checks that docs/BUNDLE.md names every variable name and
// prefix that deployd/bundle reserves (refused in vars and secrets): a renderer author
// reads the list there.
func TestBundleDocReservedNames(t *testing.T) {
	src := readRepoFile(t, "deployd/bundle/paths.go")
	doc := readRepoFile(t, "docs/BUNDLE.md")
	quoted := regexp.MustCompile(`"([A-Z_]+)"`)
	for _, decl := range []string{`reservedEnvPrefixes = []string{`, `reservedEnvNames = map[string]bool{`} {
		i := strings.Index(src, decl)
		require.GreaterOrEqual(t, i, 0, "deployd/bundle/paths.go has no %s", decl)
		body := src[i+len(decl):]
		body = body[:strings.Index(body, "}")]
		names := quoted.FindAllStringSubmatch(body, -1)
		require.NotEmpty(t, names, decl)
		for _, m := range names {
			assert.True(t, strings.Contains(doc, "`"+m[1]+"`"), "docs/BUNDLE.md does not name the reserved %s", m[1])
		}
	}
}
