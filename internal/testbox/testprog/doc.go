// Package testprog is the programs half of testbox, with nothing but the standard
// library: the programs of this module built once per test process (Build, removed by
// Run), runs of them in a process group of their own (Start, Proc, Result), WaitFor,
// Deps (what a package links, for the dependency budgets) and SkipIfShort, the one
// decision of what go test -short leaves out.
//
// Tests import it directly (testbox does not re-export it): a test that runs a program
// needs no box, and a test that must not link the agent and its dependencies (the
// OpenZiti SDK, vault/api, compose-go) that testbox's boxes bring, as cmd/monky-fakes
// and internal/engine, can have it.
package testprog
