// Package fakestack starts monky-deployd's fakes together: the fake OpenBao and the
// fake monky-tenancy on loopback, wired together (tenancy takes an environment's
// OpenBao tokens as bearers and mints its lease grants there), and, with
// Options.Docker, the fake docker. It needs no testing.TB and links no "testing", so a
// program (examples/quickstart) can use it as well as a test:
//
//	s, err := fakestack.Start(ctx, fakestack.Options{Docker: &fakedocker.Options{}})
//	if err != nil { … }
//	defer s.Close()
//	b, _ := faketenancy.BuildBundle(faketenancy.SampleApp("env-dev-01", 1))
//	sha, _, _ := s.Tenancy.PublishBundle("env-dev-01", b.Data) // check-ins now answer apply
//	s.Bao.PutSecret("env-dev-01", "db", map[string]string{"password": "…"})
//	grant := s.Bao.MintGrant("env-dev-01")                      // the box's bootstrap grant
//	// … run the agent against s.Tenancy.URL(), s.Bao.URL() and s.Docker.Env() …
//
// Stack's fields are the whole fakes (faults, sealing, token TTLs, request logs, the
// docker's script and record); deployd/deploydtest.NewStack starts a Stack for a test
// and closes it in tb.Cleanup.
package fakestack
