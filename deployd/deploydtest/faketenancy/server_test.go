package faketenancy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

func newFake(t *testing.T, opts faketenancy.Options) (*faketenancy.Server, *faketenancy.MemoryAuthority) {
	t.Helper()
	auth := faketenancy.NewMemoryAuthority()
	opts.Authority = auth
	s := faketenancy.New(opts)
	t.Cleanup(s.Close)
	return s, auth
}

func target(s *faketenancy.Server, auth *faketenancy.MemoryAuthority) deploydtest.ConformanceTarget {
	return deploydtest.ConformanceTarget{
		BaseURL: s.URL(),
		EnvA:    "env-dev-01",
		EnvB:    "env-dev-02",
		Token:   func(_ testing.TB, env string) string { return auth.Token(env) },
		Publish: func(t testing.TB, env string, data []byte) (string, int64) {
			sha, serial, err := s.PublishBundle(env, data)
			require.NoError(t, err)
			return sha, serial
		},
		SetDesired: func(_ testing.TB, env string, d faketenancy.Desired) { s.SetDesired(env, d) },
		LastLive:   func(_ testing.TB, env string) (faketenancy.Live, bool) { return s.LastLive(env) },
		PublishSignature: func(t testing.TB, env, sha string, sig []byte) {
			require.NoError(t, s.PublishSignature(env, sha, sig))
		},
	}
}

func TestConformance(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{})
	deploydtest.Conformance(t, target(s, auth))
}

func TestConformanceSmallBudget(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{LeaseBudget: 2, LeaseWindow: 10 * time.Minute})
	tg := target(s, auth)
	tg.LeaseBudget, tg.LeaseWindow = 2, 10*time.Minute
	deploydtest.Conformance(t, tg)
}
