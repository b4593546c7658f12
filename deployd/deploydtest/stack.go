package deploydtest

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/monky/monky-deployd/internal/fakes/admin"
	"github.com/monky/monky-deployd/internal/fakes/fakebao"
	"github.com/monky/monky-deployd/internal/fakes/faketenancy"
)

// The fakes' types, for other modules (which cannot import internal/fakes).
type (
	// TenancyServer is the fake monky-tenancy agent API.
	TenancyServer = faketenancy.Server
	// BaoServer is the fake OpenBao.
	BaoServer = fakebao.Server
	// Faults are the fake tenancy's misbehaviours on demand.
	Faults = faketenancy.Faults
	// Report is a report as the fake tenancy received it.
	Report = faketenancy.Report
	// CheckinRequest is a check-in as the fake tenancy received it.
	CheckinRequest = faketenancy.CheckinRequest
	// Lease is a lease the fake tenancy granted.
	Lease = faketenancy.Lease
	// Request is one request to the fake tenancy; never the bearer.
	Request = faketenancy.Request
	// BaoRequest is one request to the fake OpenBao; never a token.
	BaoRequest = fakebao.Request
)

// The fake OpenBao's login faults, for Stack.Bao.SetLoginFault.
const (
	LoginFaultNone       = fakebao.FaultNone
	LoginFaultWrapped    = fakebao.FaultWrapped
	LoginFaultAppRole    = fakebao.FaultAppRole
	LoginFaultNoToken    = fakebao.FaultNoToken
	LoginFaultLimitedUse = fakebao.FaultLimitedUse
)

// StackOptions configure NewStack. A nil *StackOptions, like every zero field, means
// the defaults.
type StackOptions struct {
	// LeaseBudget is the number of leases per environment and window; default 5.
	LeaseBudget int
	// LeaseWindow is the rolling window of the budget; default 1h.
	LeaseWindow time.Duration
	// TokenTTL of OpenBao tokens; default 1h.
	TokenTTL time.Duration
	// Now is the clock of both fakes; default time.Now.
	Now func() time.Time
	// Logger receives the fakes' debug lines; nil discards.
	Logger *slog.Logger
}

// Stack is a fake OpenBao and a fake tenancy wired together: tenancy accepts the
// OpenBao tokens of an environment as bearers and mints its lease grants there.
type Stack struct {
	// Tenancy is the fake tenancy.
	Tenancy *TenancyServer
	// Bao is the fake OpenBao.
	Bao *BaoServer
	tb  testing.TB
}

// NewStack starts both fakes on loopback and closes them in tb.Cleanup.
func NewStack(tb testing.TB, opts *StackOptions) *Stack {
	tb.Helper()
	if opts == nil {
		opts = &StackOptions{}
	}
	bao := fakebao.New(fakebao.Options{TokenTTL: opts.TokenTTL, Now: opts.Now, Logger: opts.Logger})
	tb.Cleanup(bao.Close)
	ten := faketenancy.New(faketenancy.Options{
		Authority: bao, LeaseBudget: opts.LeaseBudget, LeaseWindow: opts.LeaseWindow,
		Now: opts.Now, Logger: opts.Logger,
	})
	tb.Cleanup(ten.Close)
	return &Stack{Tenancy: ten, Bao: bao, tb: tb}
}

// TenancyURL is the base URL of the fake tenancy.
func (s *Stack) TenancyURL() string { return s.Tenancy.URL() }

// BaoAddr is the address of the fake OpenBao.
func (s *Stack) BaoAddr() string { return s.Bao.URL() }

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

// SetDesired sets what envID's check-ins answer.
func (s *Stack) SetDesired(envID string, d Desired) { s.Tenancy.SetDesired(envID, d) }

// SetFaults replaces the fake tenancy's faults.
func (s *Stack) SetFaults(f Faults) { s.Tenancy.SetFaults(f) }

// Grant mints a bootstrap grant for envID (it supersedes the env's earlier grants).
func (s *Stack) Grant(envID string) string { return s.Bao.MintGrant(envID) }

// Token logs into the fake OpenBao with a fresh grant and returns a live token of
// envID, as the agent's bootstrap does.
func (s *Stack) Token(envID string) string {
	s.tb.Helper()
	tok, err := admin.Login(context.Background(), http.DefaultClient, s.Bao.URL(), s.Grant(envID))
	if err != nil {
		s.tb.Fatalf("deploydtest: %v", err)
	}
	return tok
}

// PutSecret writes data as a new version of envID's secret at path (relative to the
// environment's root, e.g. "db") and returns the version.
func (s *Stack) PutSecret(envID, path string, data map[string]string) int {
	return s.Bao.PutSecret(envID, path, data)
}

// WaitReport waits for the n-th report of envID; it fails the test when ctx ends
// first. Call it from the test's goroutine.
func (s *Stack) WaitReport(ctx context.Context, envID string, n int) Report {
	s.tb.Helper()
	r, err := s.Tenancy.WaitReport(ctx, envID, n)
	if err != nil {
		s.tb.Fatalf("deploydtest: %v", err)
	}
	return r
}

// Reports returns envID's reports, oldest first.
func (s *Stack) Reports(envID string) []Report { return s.Tenancy.Reports(envID) }

// Checkins returns envID's check-ins, oldest first.
func (s *Stack) Checkins(envID string) []CheckinRequest { return s.Tenancy.Checkins(envID) }

// Leases returns the leases granted to envID, oldest first.
func (s *Stack) Leases(envID string) []Lease { return s.Tenancy.Leases(envID) }

// Requests returns every request to the fake tenancy, oldest first.
func (s *Stack) Requests() []Request { return s.Tenancy.Requests() }

// BaoRequests returns every request to the fake OpenBao, oldest first.
func (s *Stack) BaoRequests() []BaoRequest { return s.Bao.Requests() }

// AdminHandler returns the admin HTTP API over both fakes (docs/FAKES.md), e.g. to
// serve it with httptest.
func (s *Stack) AdminHandler() http.Handler { return admin.New(s.Tenancy, s.Bao, nil) }

// ConformanceTarget returns the stack's tenancy as a target for Conformance, with
// tokens from real logins to the fake OpenBao.
func (s *Stack) ConformanceTarget(envA, envB string) ConformanceTarget {
	return ConformanceTarget{
		BaseURL: s.TenancyURL(),
		EnvA:    envA,
		EnvB:    envB,
		Token: func(t testing.TB, envID string) string {
			t.Helper()
			tok, err := admin.Login(context.Background(), http.DefaultClient, s.Bao.URL(), s.Bao.MintGrant(envID))
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
		SetDesired: func(_ testing.TB, envID string, d Desired) { s.Tenancy.SetDesired(envID, d) },
	}
}
