// Package fakestack starts the fake OpenBao and the fake monky-tenancy on loopback,
// wired together: tenancy takes an environment's OpenBao tokens as bearers and mints
// its lease grants there. It needs no testing.TB and links no "testing", so a program
// (examples/quickstart) can use it as well as a test:
//
//	s, err := fakestack.Start(fakestack.Options{})
//	if err != nil { … }
//	defer s.Close()
//	b, _ := faketenancy.BuildBundle(faketenancy.SampleApp("env-dev-01", 1))
//	sha, _, _ := s.Tenancy.PublishBundle("env-dev-01", b.Data) // check-ins now answer apply
//	s.PutSecret("env-dev-01", "db", map[string]string{"password": "…"})
//	grant := s.Grant("env-dev-01")                              // the box's bootstrap grant
//	// … run the agent against s.TenancyURL() and s.BaoAddr() …
//
// Stack.Tenancy and Stack.Bao give the whole fake APIs (faults, sealing, token TTLs,
// request logs); deployd/deploydtest.NewStack is the same stack for tests, closed by
// tb.Cleanup, whose helpers fail the test instead of returning errors.
package fakestack
