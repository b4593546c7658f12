// Package testprog is the programs half of testbox, with nothing but the standard
// library: the programs of this module built once per test process (Build, removed by
// Run), runs of them in a process group of their own (Start, Proc, Result), WaitFor,
// Deps (what a package links, for the dependency budgets) and SkipIfShort, the one
// decision of what go test -short leaves out.
//
// testbox re-exports all of it; a test package imports testprog itself only when it
// must not link the agent and its dependencies (the OpenZiti SDK, vault/api,
// compose-go) that testbox's boxes bring: cmd/monky-fakes, internal/engine.
package testprog
