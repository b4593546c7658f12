package codes_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// moduleRoot is the root of the module, seen from this package's directory.
const moduleRoot = "../.."

// TestNoCodeLiteralsElsewhere keeps the vocabulary in one place: no Go file of the
// module outside this package (tests aside, which may assert what goes on the wire)
// writes a code's string as a literal, and no composite literal sets a Code field to a
// literal string, which would be a code the vocabulary does not have.
func TestNoCodeLiteralsElsewhere(t *testing.T) {
	known := map[string]bool{}
	for _, c := range codes.All() {
		known[string(c)] = true
	}
	self, err := filepath.Abs(".")
	require.NoError(t, err)
	files := 0
	err = filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			name := d.Name()
			if abs == self || name == "testdata" || (strings.HasPrefix(name, ".") && path != moduleRoot) {
				return filepath.SkipDir
			}
			// Another module (tools/…) keeps its own rules.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != moduleRoot {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && known[s] {
					t.Errorf("%s writes the code %s as a literal: use its constant of deployd/codes", path, s)
				}
			case *ast.KeyValueExpr:
				key, ok := n.Key.(*ast.Ident)
				lit, isLit := n.Value.(*ast.BasicLit)
				if ok && isLit && lit.Kind == token.STRING && (key.Name == "Code" || strings.HasSuffix(key.Name, "Code")) && lit.Value != `""` {
					t.Errorf("%s sets %s to the literal %s: use a constant of deployd/codes", path, key.Name, lit.Value)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 50, "the walk saw the module")
}
