package deploydtest

import (
	"context"
	"testing"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// NewStack starts the fakes (fakestack.Start: tenancy and OpenBao, and the fake docker
// with Options.Docker) for tb and closes them in tb.Cleanup; a nil opts means the
// defaults. It fails the test when they do not start.
func NewStack(tb testing.TB, opts *fakestack.Options) *fakestack.Stack {
	tb.Helper()
	return started(tb, opts, fakestack.Start)
}

// NewDocker installs a fake docker alone (fakedocker.Install) for tb and closes it in
// tb.Cleanup; a nil opts means the defaults (the shared build of the program, every
// command succeeds). It fails the test when the install does.
func NewDocker(tb testing.TB, opts *fakedocker.Options) *fakedocker.Docker {
	tb.Helper()
	return started(tb, opts, fakedocker.Install)
}

// started starts a fake with start and *opts (nil: the zero options) for tb, and closes
// it in tb.Cleanup; it fails the test when the fake does not start or close.
func started[O any, F interface{ Close() error }](tb testing.TB, opts *O, start func(context.Context, O) (F, error)) F {
	tb.Helper()
	if opts == nil {
		opts = new(O)
	}
	f, err := start(tb.Context(), *opts)
	fatal(tb, err)
	tb.Cleanup(func() {
		if err := f.Close(); err != nil {
			tb.Errorf("deploydtest: %v", err)
		}
	})
	return f
}

// StackTarget is the tenancy of s as a target for Conformance, with tokens from real
// logins to the fake OpenBao.
func StackTarget(s *fakestack.Stack, envA, envB string) ConformanceTarget {
	return ConformanceTarget{
		BaseURL: s.Tenancy.URL(),
		EnvA:    envA,
		EnvB:    envB,
		Token: func(t testing.TB, envID string) string {
			t.Helper()
			tok, err := s.Login(t.Context(), envID)
			fatal(t, err)
			return tok
		},
		Publish: func(t testing.TB, envID string, data []byte) (string, int64) {
			t.Helper()
			sha, serial, err := s.Tenancy.PublishBundle(envID, data)
			fatal(t, err)
			return sha, serial
		},
		SetDesired: func(_ testing.TB, envID string, d faketenancy.Desired) { s.Tenancy.SetDesired(envID, d) },
		LastLive:   func(_ testing.TB, envID string) (faketenancy.Live, bool) { return s.Tenancy.LastLive(envID) },
		PublishSignature: func(t testing.TB, envID, sha string, sig []byte) {
			t.Helper()
			fatal(t, s.Tenancy.PublishSignature(envID, sha, sig))
		},
	}
}

// fatal fails t on err.
func fatal(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("deploydtest: %v", err)
	}
}
