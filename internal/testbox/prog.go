package testbox

import (
	"testing"
	"time"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// The programs half of the harness is testprog's (its own package, so that a test that
// must not link the agent can have it); testbox re-exports it.

// AgentPkg is the import path of the agent binary.
const AgentPkg = testprog.AgentPkg

// ShortReason is why SkipIfShort skips.
const ShortReason = testprog.ShortReason

// Result is one finished run of a program (testprog.Result).
type Result = testprog.Result

// Proc is a started run of a program in a process group of its own (testprog.Proc).
type Proc = testprog.Proc

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads
// (testprog.SyncBuffer).
type SyncBuffer = testprog.SyncBuffer

// SkipIfShort skips tb under go test -short: testprog.SkipIfShort.
func SkipIfShort(tb testing.TB) {
	tb.Helper()
	testprog.SkipIfShort(tb)
}

// Build builds the package pkg of this module once per test process and set of
// flags, and skips tb under -short: testprog.Build.
func Build(tb testing.TB, pkg string, flags ...string) string {
	tb.Helper()
	return testprog.Build(tb, pkg, flags...)
}

// GoTool returns the go tool that Build uses: testprog.GoTool.
func GoTool(tb testing.TB) string {
	tb.Helper()
	return testprog.GoTool(tb)
}

// Deps returns what go list -deps says pkg links: testprog.Deps.
func Deps(tb testing.TB, pkg string) []string {
	tb.Helper()
	return testprog.Deps(tb, pkg)
}

// NonStdDeps is Deps without the standard library: testprog.NonStdDeps.
func NonStdDeps(tb testing.TB, pkg string) []string {
	tb.Helper()
	return testprog.NonStdDeps(tb, pkg)
}

// Run runs the tests of m and then removes every program Build built: testprog.Run.
func Run(m *testing.M) int { return testprog.Run(m) }

// Start starts the program bin with args in dir, with exactly the environment env:
// testprog.Start.
func Start(tb testing.TB, bin, dir string, env []string, args ...string) *Proc {
	tb.Helper()
	return testprog.Start(tb, bin, dir, env, args...)
}

// WaitFor polls cond until it holds, or fails tb when d passes first:
// testprog.WaitFor.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	testprog.WaitFor(tb, d, what, cond)
}
