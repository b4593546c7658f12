package testprog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// AgentPkg is the import path of the agent binary.
const AgentPkg = "github.com/monky/monky-deployd/cmd/monky-deployd"

// builds holds the programs built by this test process: each (package, flags) once.
var builds struct {
	mu   sync.Mutex
	dir  string
	done map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Build builds the package pkg (an import path of this module) with CGO off and the
// extra go build flags, once per test process and set of flags, and returns the
// program's path. Run removes what it built. Under go test -short it skips tb
// (SkipIfShort): building and running the programs is not part of the quick loop.
func Build(tb testing.TB, pkg string, flags ...string) string {
	tb.Helper()
	SkipIfShort(tb)
	key := pkg + "\x00" + strings.Join(flags, "\x00")
	builds.mu.Lock()
	if builds.done == nil {
		builds.done = map[string]*build{}
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "monky-testprog-")
		if err != nil {
			builds.mu.Unlock()
			tb.Fatalf("testprog: %v", err)
		}
		builds.dir = dir
	}
	b := builds.done[key]
	if b == nil {
		b = &build{path: filepath.Join(builds.dir, fmt.Sprintf("%d", len(builds.done)), path.Base(pkg))}
		builds.done[key] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() { b.err = goBuild(b.path, pkg, flags) })
	if b.err != nil {
		tb.Fatalf("testprog: %v", b.err)
	}
	return b.path
}

// goBuild runs go build -o out flags… pkg.
func goBuild(out, pkg string, flags []string) error {
	goTool, err := goToolPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command(goTool, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if data, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(data)))
	}
	return nil
}

// goToolPath finds the go tool: the one on PATH (go test puts its own there), else the
// one under $GOROOT.
func goToolPath() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no go tool on PATH or under $GOROOT")
}

// GoTool returns the go tool that Build uses; it fails tb when there is none.
func GoTool(tb testing.TB) string {
	tb.Helper()
	p, err := goToolPath()
	if err != nil {
		tb.Fatalf("testprog: %v", err)
	}
	return p
}

// Run runs the tests of m and then removes every program Build built; a package's
// TestMain returns os.Exit(testprog.Run(m)) or does its own cleaning in
// between.
func Run(m *testing.M) int {
	code := m.Run()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
		builds.dir, builds.done = "", nil
	}
	return code
}

// Deps returns what go list -deps says pkg links, pkg itself included: pkg is an import
// path or a directory ("." is the test's own package). It fails tb when the list
// cannot be had. The packages' dependency budgets are checked on it.
func Deps(tb testing.TB, pkg string) []string {
	tb.Helper()
	return goList(tb, pkg, "{{.ImportPath}}")
}

// NonStdDeps is Deps without the standard library's packages.
func NonStdDeps(tb testing.TB, pkg string) []string {
	tb.Helper()
	return goList(tb, pkg, "{{if not .Standard}}{{.ImportPath}}{{end}}")
}

func goList(tb testing.TB, pkg, format string) []string {
	tb.Helper()
	out, err := exec.Command(GoTool(tb), "list", "-deps", "-f", format, pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		tb.Fatalf("testprog: go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
