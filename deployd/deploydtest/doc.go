// Package deploydtest holds the test helpers over monky-deployd's public fakes, for
// the Go test suites of this and other repositories, and the conformance suite of the
// tenancy agent API. It imports "testing"; the fakes themselves do not:
//
//   - deployd/deploydtest/faketenancy: the fake monky-tenancy agent API, and the
//     bundle builder (BuildBundle, SampleApp) with the fake's own bundle sha (SHA);
//   - deployd/deploydtest/fakebao: the fake OpenBao;
//   - deployd/deploydtest/fakestack: both fakes wired together (Start, Close);
//   - deployd/deploydtest/fakedocker: the fake docker, program and Engine API
//     (Install, Close, Env), for a whole apply with no docker daemon.
//
// NewStack starts a fakestack.Stack and closes it in tb.Cleanup; its helpers fail the
// test instead of returning errors. MakeBundle is faketenancy.BuildBundle for a test:
//
//	s := deploydtest.NewStack(t, nil)
//	b := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"})
//	sha, _ := s.PublishBundle("env-dev-01", b.Data)  // check-ins now answer apply
//	s.PutSecret("env-dev-01", "db", map[string]string{"password": "…"})
//	grant := s.Grant("env-dev-01")                    // the box's bootstrap grant
//	// … run the agent against s.TenancyURL() and s.BaoAddr() …
//	r := s.WaitReport(ctx, "env-dev-01", 1)
//
// Clock is a clock the test moves by hand (Advance), for the fakes' Now options.
//
// Conformance checks any server — the fake here, the real monky-tenancy in its own
// integration tests — against the contract of the four agent calls
// (docs/PROTOCOL.md) through hooks the target implements (ConformanceTarget).
//
// This package and the fakes must never be linked into the agent binary. Suites in
// other languages use cmd/monky-fakes (docs/FAKES.md).
package deploydtest
