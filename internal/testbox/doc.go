// Package testbox is the one box harness of this module's tests: a box's directories
// and config (built from deployd.DefaultConfig and written as YAML for the binary), the
// fakes and the fake docker (one fakestack.Stack, through deploydtest.NewStack), the
// bootstrap grant, published bundles, in-process agents and ticks, runs of the real
// binary (started in their own process group, waited for, killed), and what a test
// reads back: reports, leases, the live sha, the state.
//
// Every test package that drives a box (deployd, cmd/monky-deployd, test/bench,
// test/engine, test/ziti, and the boxes of test/soak and test/fleet on their shared
// fakes, Options.SharedStack) builds on it and keeps only its own helpers; every test
// that builds a program of this module builds it with Build. SkipIfShort is the one
// decision of what go test -short leaves out. Build, Start, WaitFor and SkipIfShort are
// testprog's, re-exported: a test that must not link the agent imports
// internal/testbox/testprog alone. It imports testing, so the agent binary never links
// it (cmd/monky-deployd's deps test checks).
package testbox
