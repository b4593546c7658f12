package testprog

import "testing"

// ShortReason is why SkipIfShort skips: the quick loop (go test -short ./...) leaves
// out what builds and spawns the programs; CI runs everything (go test -race ./...).
const ShortReason = "builds and spawns binaries; run without -short"

// SkipIfShort skips tb under go test -short. It is the one decision of what the quick
// loop leaves out: a test that builds a program of this module (Build) or
// runs one, runs a real engine, the mesh or systemd, soaks or drives a fleet, or sleeps
// for seconds. Build calls it, so a test that reaches a build under -short is skipped
// there (after its in-process part); tests that are only that call it first.
func SkipIfShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(ShortReason)
	}
}
