// Command floors lays the files of one Go package out on floors, the way
// DEVELOPERS.md reads a package: a file uses another when it names something
// declared there (a function, type, method, field, variable or constant), and a
// file stands above every file it uses. Where uses run in a loop no layout keeps
// them all pointing down: floors puts the fewest it can find against the grain,
// and those are the uses that run back up a floor.
//
//	go run ./tools/floors [-v] DIR
//
// It prints the package's figures (files, floors, uses between files, uses that
// run back up), the files from the top floor down, and each use that runs back up
// with the names it takes; -v lists every use. It type-checks the package against
// the export data that `go list -export` builds, so it needs the package to build.
package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list every use between files, with the names it takes")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./tools/floors [-v] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	g, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "floors:", err)
		os.Exit(1)
	}
	g.print(os.Stdout, *verbose)
}

// graph is the files of one package and the uses between them.
type graph struct {
	pkg   string
	files []string         // base names, sorted
	lines map[string]int   // by file
	uses  map[use][]string // the names each use takes, sorted
	floor map[string]int   // by file, from 1 (the ground); set by layout
	up    map[use]bool     // the uses that run back up; set by layout
	order map[string]int   // by file: its place from the top; set by layout
}

// use is file from naming something declared in file to.
type use struct{ from, to string }

// listed is what `go list -export -json` says of one package.
type listed struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
}

// load type-checks the package in dir and collects the uses between its files.
func load(dir string) (*graph, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "list", "-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles", ".")
	cmd.Dir = abs
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	exports := map[string]string{}
	var self listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if p.Dir == abs {
			self = p
		}
	}
	fset := token.NewFileSet()
	g := &graph{pkg: self.ImportPath, lines: map[string]int{}, uses: map[use][]string{}}
	var files []*ast.File
	for _, name := range self.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(abs, name), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		g.files = append(g.files, name)
		g.lines[name] = fset.File(f.Pos()).LineCount()
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check(self.ImportPath, fset, files, info)
	if err != nil {
		return nil, err
	}
	for id, obj := range info.Uses {
		// Package-level names, and methods and fields (which have no scope).
		if obj.Pkg() != pkg || (obj.Parent() != nil && obj.Parent() != pkg.Scope()) {
			continue
		}
		from, to := filepath.Base(fset.File(id.Pos()).Name()), filepath.Base(fset.File(obj.Pos()).Name())
		if from != to && !slices.Contains(g.uses[use{from, to}], obj.Name()) {
			g.uses[use{from, to}] = append(g.uses[use{from, to}], obj.Name())
		}
	}
	for _, names := range g.uses {
		slices.Sort(names)
	}
	slices.Sort(g.files)
	g.layout()
	return g, nil
}

// layout orders the files from the top down so that few uses point up (the greedy
// order of Eades, Lin and Smyth: files that nothing left uses go on top, files that
// use nothing left at the bottom, else the file with the most uses out over uses in),
// then puts each file one floor above the highest file it uses down that order.
// A use that then does not point down runs back up.
func (g *graph) layout() {
	left := map[string]bool{}
	for _, f := range g.files {
		left[f] = true
	}
	degree := func(f string, out bool) int {
		n := 0
		for u := range g.uses {
			if out && u.from == f && left[u.to] || !out && u.to == f && left[u.from] {
				n++
			}
		}
		return n
	}
	var top, bottom []string
	for len(left) > 0 {
		moved := false
		for _, f := range g.files { // nothing left uses it: to the top
			if left[f] && degree(f, false) == 0 {
				top, moved = append(top, f), true
				delete(left, f)
			}
		}
		for _, f := range g.files { // it uses nothing left: to the bottom
			if left[f] && degree(f, true) == 0 {
				bottom, moved = append([]string{f}, bottom...), true
				delete(left, f)
			}
		}
		if moved {
			continue
		}
		best := ""
		for _, f := range g.files {
			if left[f] && (best == "" || degree(f, true)-degree(f, false) > degree(best, true)-degree(best, false)) {
				best = f
			}
		}
		top = append(top, best)
		delete(left, best)
	}
	ordered := append(top, bottom...)
	g.order = map[string]int{}
	for i, f := range ordered {
		g.order[f] = i
	}
	g.floor, g.up = map[string]int{}, map[use]bool{}
	for _, f := range slices.Backward(ordered) { // from the bottom up
		g.floor[f] = 1
		for u := range g.uses {
			if u.from == f && g.order[u.to] > g.order[f] {
				g.floor[f] = max(g.floor[f], g.floor[u.to]+1)
			}
		}
	}
	for u := range g.uses {
		if g.floor[u.from] <= g.floor[u.to] {
			g.up[u] = true
		}
	}
}

// sortedUses returns the uses of g from the top floor down.
func (g *graph) sortedUses() []use {
	var out []use
	for u := range g.uses {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b use) int {
		return cmp.Or(g.floor[b.from]-g.floor[a.from], cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
	})
	return out
}

func (g *graph) print(w io.Writer, verbose bool) {
	floors := 0
	for _, n := range g.floor {
		floors = max(floors, n)
	}
	fmt.Fprintf(w, "%s: %d files on %d floors; %d uses between files, %d of them back up a floor\n",
		g.pkg, len(g.files), floors, len(g.uses), len(g.up))
	files := slices.Clone(g.files)
	slices.SortFunc(files, func(a, b string) int { return cmp.Or(g.floor[b]-g.floor[a], cmp.Compare(a, b)) })
	for _, f := range files {
		fmt.Fprintf(w, "floor %2d  %s  %d lines\n", g.floor[f], f, g.lines[f])
	}
	for _, u := range g.sortedUses() {
		switch {
		case g.up[u]:
			fmt.Fprintf(w, "up    %s (floor %d) -> %s (floor %d): %s\n", u.from, g.floor[u.from], u.to, g.floor[u.to], strings.Join(g.uses[u], " "))
		case verbose:
			fmt.Fprintf(w, "down  %s -> %s: %s\n", u.from, u.to, strings.Join(g.uses[u], " "))
		}
	}
}
