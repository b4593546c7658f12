// Package deploydtest is the public face of monky-deployd's fakes for Go test suites
// of other repositories, and the conformance suite of the tenancy agent API.
//
// Conformance checks any server — the fake tenancy here, the real monky-tenancy in its
// own integration tests — against the contract of the four agent calls (SPEC §5),
// through hooks the target implements (ConformanceTarget). MakeBundle builds bundles
// of SPEC §7 with their sha.
//
// This package is for tests: it imports "testing" and must never be linked into the
// agent binary.
package deploydtest
