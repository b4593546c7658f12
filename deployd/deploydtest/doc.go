// Package deploydtest holds the test helpers over monky-deployd's public fakes, for
// the Go test suites of this and other repositories, and the conformance suite of the
// tenancy agent API. It imports "testing"; the fakes themselves do not:
//
//   - deployd/deploydtest/faketenancy: the fake monky-tenancy agent API, and the
//     bundle builder (BuildBundle, SampleApp) with the fake's own bundle sha (SHA);
//   - deployd/deploydtest/fakebao: the fake OpenBao;
//   - deployd/deploydtest/fakedocker: the fake docker, program and Engine API
//     (Install, Close, Env), for a whole apply with no docker daemon;
//   - deployd/deploydtest/fakestack: the fakes together (Start, Close): tenancy and
//     OpenBao wired together, and the fake docker with Options.Docker.
//
// NewStack starts a fakestack.Stack and NewDocker installs a fake docker alone, both
// closed in tb.Cleanup; MakeBundle is faketenancy.BuildBundle for a test. Each fails
// the test where the fake would return an error:
//
//	s := deploydtest.NewStack(t, &fakestack.Options{Docker: &fakedocker.Options{}})
//	b := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"})
//	sha, _, err := s.Tenancy.PublishBundle("env-dev-01", b.Data) // check-ins now answer apply
//	s.Bao.PutSecret("env-dev-01", "db", map[string]string{"password": "…"})
//	grant := s.Bao.MintGrant("env-dev-01")                       // the box's bootstrap grant
//	// … run the agent against s.Tenancy.URL(), s.Bao.URL() and s.Docker.Env() …
//	r, err := s.Tenancy.WaitReport(ctx, "env-dev-01", 1)
//
// Clock is a clock the test moves by hand (Advance), for the fakes' Now options.
//
// Conformance checks any server — the fake here (StackTarget), the real monky-tenancy
// in its own integration tests — against the contract of the four agent calls
// (docs/PROTOCOL.md) through hooks the target implements (ConformanceTarget).
//
// This package and the fakes must never be linked into the agent binary. Suites in
// other languages use cmd/monky-fakes and cmd/fake-docker (docs/FAKES.md).
package deploydtest
