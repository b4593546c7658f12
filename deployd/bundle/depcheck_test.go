package bundle

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// forbiddenDeps may never be linked by importers of this package (docs/ARCHITECTURE.md): the
// renderer's CI imports it and must not pull the agent's heavy or test-only code.
var forbiddenDeps = []string{
	"github.com/openziti/",
	"github.com/hashicorp/vault/",
	"testing",
	"net/http/httptest",
	"github.com/stretchr/testify",
}

func TestDependencyBudget(t *testing.T) {
	deps := testprog.Deps(t, ".")
	require.Contains(t, deps, "github.com/compose-spec/compose-go/v2/loader", "the listing is real")
	for _, dep := range deps {
		for _, bad := range forbiddenDeps {
			if dep == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("deployd/bundle depends on %s (forbidden: %s)", dep, bad)
			}
		}
	}
}

// TestPackageDoc checks there is exactly one package doc comment, in doc.go.
func TestPackageDoc(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var withDoc []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		require.NoError(t, err)
		if pf.Doc != nil {
			withDoc = append(withDoc, f)
		}
	}
	assert.Equal(t, []string{"doc.go"}, withDoc)
}
