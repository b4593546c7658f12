package packaging_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeCheck is the README's "Check a bundle from Go": its Go block, then the block of
// what that code prints.
var readmeCheck = regexp.MustCompile("(?s)\n## Check a bundle from Go\n.*?```go\n(.*?)```\n.*?```\n(.*?)```\n")

// TestReadmeCheckIsTheExample: the README's "Check a bundle from Go" quotes the function
// check of deployd/bundle's Example_check with its doc comment, and shows what it
// prints as the example's // Output: says (which go test checks).
func TestReadmeCheckIsTheExample(t *testing.T) {
	m := readmeCheck.FindStringSubmatch(readRepoFile(t, "README.md"))
	require.NotNil(t, m, "README.md has a Go block and an output block under \"Check a bundle from Go\"")
	code, output := m[1], m[2]

	const file = "deployd/bundle/example_check_test.go"
	src := readRepoFile(t, file)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	require.NoError(t, err)
	funcs := map[string]*ast.FuncDecl{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok {
			funcs[fn.Name.Name] = fn
		}
	}
	check, example := funcs["check"], funcs["Example_check"]
	require.NotNil(t, check, "%s has check", file)
	require.NotNil(t, example, "%s has Example_check", file)
	require.NotNil(t, check.Doc, "check has a doc comment")
	quoted := src[fset.Position(check.Doc.Pos()).Offset:fset.Position(check.End()).Offset] + "\n"
	assert.Equal(t, quoted, code, "the README's Go block is check of %s, with its doc comment", file)

	var want string
	for _, cg := range f.Comments {
		if cg.Pos() > example.Body.Lbrace && cg.End() < example.Body.Rbrace {
			if rest, ok := strings.CutPrefix(cg.Text(), "Output:\n"); ok {
				want = rest
			}
		}
	}
	require.NotEmpty(t, want, "Example_check has an // Output: comment")
	assert.Equal(t, want, output, "the README shows what Example_check prints")
}
