package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// usageCommands returns the commands that usage lists, in its order.
func usageCommands() []string {
	var out []string
	for line := range strings.Lines(usage) {
		if rest, ok := strings.CutPrefix(line, "  monky-deployd "); ok {
			name, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			out = append(out, name)
		}
	}
	return out
}

// switchCommands returns the names that Main runs, the keys of the commands table
// and the cases of command (cli.go), without the aliases --version, -h and --help.
func switchCommands(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "cli.go", nil, 0)
	require.NoError(t, err)
	var out []string
	name := func(e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		require.True(t, ok && lit.Kind == token.STRING, "a command's name is a string literal")
		name, err := strconv.Unquote(lit.Value)
		require.NoError(t, err)
		if !strings.HasPrefix(name, "-") {
			out = append(out, name)
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.Name != "command" {
				continue
			}
			ast.Inspect(d.Body, func(n ast.Node) bool {
				if cc, ok := n.(*ast.CaseClause); ok {
					for _, e := range cc.List {
						name(e)
					}
				}
				return true
			})
		case *ast.GenDecl:
			ast.Inspect(d, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok && vs.Names[0].Name == "commands" {
					for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
						name(e.(*ast.KeyValueExpr).Key)
					}
					return false
				}
				return true
			})
		}
	}
	return out
}

// TestUsageListsEveryCommand: usage, the package doc and the command switch name the
// same commands; the package doc lists them with usage's very lines.
func TestUsageListsEveryCommand(t *testing.T) {
	listed := usageCommands()
	assert.Equal(t, []string{"run", "status", "plan", "bootstrap", "hold", "verify", "pack", "sign", "keygen", "version", "help"}, listed)
	run := switchCommands(t)
	slices.Sort(run)
	assert.Equal(t, slices.Sorted(slices.Values(listed)), run, "the commands Main runs are those usage lists")

	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	require.NotNil(t, f.Doc, "main.go has the package doc")
	var doc strings.Builder
	for line := range strings.Lines(f.Doc.Text()) {
		if rest, ok := strings.CutPrefix(line, "\t"); ok { // the doc's code block
			doc.WriteString("  " + rest)
		}
	}
	assert.Equal(t, strings.TrimPrefix(usage, "usage:\n"), doc.String(),
		"the package doc (main.go) lists the commands as usage (cli.go) does")
}

// TestCommandHelp: COMMAND --help, -h and -help print the command's usage and flags on
// stdout and exit 0, also where the command has a required flag or argument; help
// COMMAND prints the same.
func TestCommandHelp(t *testing.T) {
	for _, name := range usageCommands() {
		if name == "help" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := runMain(t, nil, name, "--help")
			assert.Equal(t, 0, r.Code, r.Stderr)
			assert.Empty(t, r.Stderr)
			assert.True(t, strings.HasPrefix(r.Stdout, "usage:\n  monky-deployd "+name), r.Stdout)
			golden.Assert(t, "golden/help-"+name+".txt", []byte(r.Stdout))
			for _, args := range [][]string{{name, "-h"}, {name, "-help"}, {"help", name}, {"--help", name}} {
				again := runMain(t, nil, args...)
				assert.Equal(t, 0, again.Code, "%v", args)
				assert.Equal(t, r.Stdout, again.Stdout, "%v", args)
				assert.Empty(t, again.Stderr, "%v", args)
			}
		})
	}
	t.Run("help after other flags", func(t *testing.T) {
		r := runMain(t, nil, "status", "--json", "--config", "/nonexistent/config.yaml", "-h")
		assert.Equal(t, 0, r.Code)
		assert.True(t, strings.HasPrefix(r.Stdout, "usage:\n  monky-deployd status"), r.Stdout)
		assert.Empty(t, r.Stderr, "the config is not read")
	})
}
