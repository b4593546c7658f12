// Package deploydtest is the public face of monky-deployd's fakes for the Go test
// suites of other repositories, and the conformance suite of the tenancy agent API.
//
// NewStack starts a fake OpenBao and a fake monky-tenancy on loopback, wired together
// (tenancy takes the environment's OpenBao tokens as bearers and mints its lease
// grants there), and closes them in tb.Cleanup:
//
//	s := deploydtest.NewStack(t, nil)
//	b := deploydtest.MakeBundle(t, deploydtest.BundleSpec{EnvID: "env-dev-01"})
//	sha, _ := s.PublishBundle("env-dev-01", b.Data)  // check-ins now answer apply
//	s.PutSecret("env-dev-01", "db", map[string]string{"password": "…"})
//	grant := s.Grant("env-dev-01")                    // the box's bootstrap grant
//	// … run the agent against s.TenancyURL() and s.BaoAddr() …
//	r := s.WaitReport(ctx, "env-dev-01", 1)
//
// Stack is thin: its types are aliases of the internal fakes, and Stack.Tenancy and
// Stack.Bao give the whole fake APIs (faults, sealing, token TTLs, request logs).
//
// Conformance checks any server — the fake here, the real monky-tenancy in its own
// integration tests — against the contract of the four agent calls (SPEC §5,
// docs/PROTOCOL.md) through hooks the target implements (ConformanceTarget).
// MakeBundle builds bundles of SPEC §7 with their sha.
//
// This package is for tests: it imports "testing" and must never be linked into the
// agent binary. Suites in other languages use cmd/monky-fakes (docs/FAKES.md).
package deploydtest
