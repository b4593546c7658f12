package fakestack

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/admin"
)

// Options configure Start. Zero fields are the documented defaults.
type Options struct {
	// LeaseBudget is the number of leases per environment and window; default 5.
	LeaseBudget int
	// LeaseWindow is the rolling window of the budget; default 1h.
	LeaseWindow time.Duration
	// TokenTTL of OpenBao tokens; default 1h.
	TokenTTL time.Duration
	// NextCheckin is next_checkin_s of every check-in answer; default 60s.
	NextCheckin time.Duration
	// Now is the clock of both fakes; default time.Now.
	Now func() time.Time
	// Logger receives the fakes' debug lines; nil discards.
	Logger *slog.Logger
}

// Stack is a fake OpenBao and a fake tenancy wired together: tenancy accepts the
// OpenBao tokens of an environment as bearers and mints its lease grants there. Its
// methods are safe for concurrent use.
type Stack struct {
	// Tenancy is the fake tenancy.
	Tenancy *faketenancy.Server
	// Bao is the fake OpenBao.
	Bao *fakebao.Server
}

// Start starts both fakes on loopback. Stop them with Close.
func Start(opts Options) (*Stack, error) {
	bao, err := fakebao.Start(fakebao.Options{TokenTTL: opts.TokenTTL, Now: opts.Now, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	ten, err := faketenancy.Start(faketenancy.Options{
		Authority: bao, LeaseBudget: opts.LeaseBudget, LeaseWindow: opts.LeaseWindow,
		NextCheckin: opts.NextCheckin, Now: opts.Now, Logger: opts.Logger,
	})
	if err != nil {
		bao.Close()
		return nil, err
	}
	return &Stack{Tenancy: ten, Bao: bao}, nil
}

// Close stops both fakes and closes their connections.
func (s *Stack) Close() {
	s.Tenancy.Close()
	s.Bao.Close()
}

// TenancyURL is the base URL of the fake tenancy.
func (s *Stack) TenancyURL() string { return s.Tenancy.URL() }

// BaoAddr is the address of the fake OpenBao.
func (s *Stack) BaoAddr() string { return s.Bao.URL() }

// SetDesired sets what envID's check-ins answer.
func (s *Stack) SetDesired(envID string, d faketenancy.Desired) { s.Tenancy.SetDesired(envID, d) }

// SetFaults replaces the fake tenancy's faults.
func (s *Stack) SetFaults(f faketenancy.Faults) { s.Tenancy.SetFaults(f) }

// Grant mints a bootstrap grant for envID (it supersedes the env's earlier grants).
func (s *Stack) Grant(envID string) string { return s.Bao.MintGrant(envID) }

// Login logs into the fake OpenBao with a fresh grant of envID, as the agent's
// bootstrap does, and returns the live token.
func (s *Stack) Login(ctx context.Context, envID string) (string, error) {
	return admin.Login(ctx, http.DefaultClient, s.Bao.URL(), s.Grant(envID))
}

// PutSecret writes data as a new version of envID's secret at path (relative to the
// environment's root, e.g. "db") and returns the version.
func (s *Stack) PutSecret(envID, path string, data map[string]string) int {
	return s.Bao.PutSecret(envID, path, data)
}

// Reports returns envID's reports, oldest first.
func (s *Stack) Reports(envID string) []faketenancy.Report { return s.Tenancy.Reports(envID) }

// Checkins returns envID's check-ins, oldest first.
func (s *Stack) Checkins(envID string) []faketenancy.CheckinRequest {
	return s.Tenancy.Checkins(envID)
}

// Leases returns the leases granted to envID, oldest first.
func (s *Stack) Leases(envID string) []faketenancy.Lease { return s.Tenancy.Leases(envID) }

// Requests returns every request to the fake tenancy, oldest first.
func (s *Stack) Requests() []faketenancy.Request { return s.Tenancy.Requests() }

// BaoRequests returns every request to the fake OpenBao, oldest first.
func (s *Stack) BaoRequests() []fakebao.Request { return s.Bao.Requests() }

// AdminHandler returns the admin HTTP API over both fakes (docs/FAKES.md), e.g. to
// serve it with net/http/httptest; cmd/monky-fakes serves the same API.
func (s *Stack) AdminHandler() http.Handler { return admin.New(s.Tenancy, s.Bao, nil) }
