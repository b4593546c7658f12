package deploydtest

import (
	"context"
	"testing"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// Stack is a fakestack.Stack for a test: NewStack closes it in tb.Cleanup, and
// PublishBundle, Token and WaitReport fail the test instead of returning an error.
// Every other method, and the Tenancy and Bao fields, are fakestack.Stack's.
type Stack struct {
	*fakestack.Stack
	tb testing.TB
}

// NewStack starts both fakes on loopback (fakestack.Start) and closes them in
// tb.Cleanup. A nil opts means the defaults.
func NewStack(tb testing.TB, opts *fakestack.Options) *Stack {
	tb.Helper()
	if opts == nil {
		opts = &fakestack.Options{}
	}
	s, err := fakestack.Start(*opts)
	if err != nil {
		tb.Fatalf("deploydtest: %v", err)
	}
	tb.Cleanup(s.Close)
	return &Stack{Stack: s, tb: tb}
}

// PublishBundle publishes a bundle (tar or tar.gz) for envID and makes it desired;
// it fails the test if the bundle is not a complete tar.
func (s *Stack) PublishBundle(envID string, data []byte) (sha string, serial int64) {
	s.tb.Helper()
	sha, serial, err := s.Tenancy.PublishBundle(envID, data)
	if err != nil {
		s.tb.Fatalf("deploydtest: %v", err)
	}
	return sha, serial
}

// Token logs into the fake OpenBao with a fresh grant and returns a live token of
// envID, as the agent's bootstrap does; it fails the test if the login fails.
func (s *Stack) Token(envID string) string {
	s.tb.Helper()
	tok, err := s.Login(context.Background(), envID)
	if err != nil {
		s.tb.Fatalf("deploydtest: %v", err)
	}
	return tok
}

// WaitReport waits for the n-th report of envID; it fails the test when ctx ends
// first. Call it from the test's goroutine.
func (s *Stack) WaitReport(ctx context.Context, envID string, n int) faketenancy.Report {
	s.tb.Helper()
	r, err := s.Tenancy.WaitReport(ctx, envID, n)
	if err != nil {
		s.tb.Fatalf("deploydtest: %v", err)
	}
	return r
}

// PublishSignature publishes sig as the signature of the bundle sha of envID; it
// fails the test if that bundle is not published for envID.
func (s *Stack) PublishSignature(envID, sha string, sig []byte) {
	s.tb.Helper()
	if err := s.Tenancy.PublishSignature(envID, sha, sig); err != nil {
		s.tb.Fatalf("deploydtest: %v", err)
	}
}

// ConformanceTarget returns the stack's tenancy as a target for Conformance, with
// tokens from real logins to the fake OpenBao.
func (s *Stack) ConformanceTarget(envA, envB string) ConformanceTarget {
	return ConformanceTarget{
		BaseURL: s.TenancyURL(),
		EnvA:    envA,
		EnvB:    envB,
		Token: func(t testing.TB, envID string) string {
			t.Helper()
			tok, err := s.Login(context.Background(), envID)
			if err != nil {
				t.Fatalf("deploydtest: %v", err)
			}
			return tok
		},
		Publish: func(t testing.TB, envID string, data []byte) (string, int64) {
			t.Helper()
			sha, serial, err := s.Tenancy.PublishBundle(envID, data)
			if err != nil {
				t.Fatalf("deploydtest: %v", err)
			}
			return sha, serial
		},
		SetDesired: func(_ testing.TB, envID string, d faketenancy.Desired) { s.Tenancy.SetDesired(envID, d) },
		LastLive:   func(_ testing.TB, envID string) (faketenancy.Live, bool) { return s.Tenancy.LastLive(envID) },
		PublishSignature: func(t testing.TB, envID, sha string, sig []byte) {
			t.Helper()
			if err := s.Tenancy.PublishSignature(envID, sha, sig); err != nil {
				t.Fatalf("deploydtest: %v", err)
			}
		},
	}
}
