package testbox

import "github.com/monky/monky-deployd/internal/testbox/testprog"

// The programs half of the harness is testprog's (its own package, so that a test that
// must not link the agent can have it); testbox re-exports what its users call.

// AgentPkg is the import path of the agent binary.
const AgentPkg = testprog.AgentPkg

type (
	// Result is one finished run of a program (testprog.Result).
	Result = testprog.Result
	// Proc is a started run of a program in a process group of its own (testprog.Proc).
	Proc = testprog.Proc
	// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads
	// (testprog.SyncBuffer).
	SyncBuffer = testprog.SyncBuffer
)

// testprog's functions, under the same names: SkipIfShort, Build (once per test
// process and set of flags; skips under -short), GoTool, Deps, Run (removes what
// Build built), Start and WaitFor. Each marks itself a helper.
var (
	SkipIfShort = testprog.SkipIfShort
	Build       = testprog.Build
	GoTool      = testprog.GoTool
	Deps        = testprog.Deps
	Run         = testprog.Run
	Start       = testprog.Start
	WaitFor     = testprog.WaitFor
)
