package fakestack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
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
	// Now is the clock of tenancy and OpenBao; default time.Now.
	Now func() time.Time
	// Logger receives the fakes' debug lines; nil discards.
	Logger *slog.Logger
	// Docker, when set, installs a fake docker too (fakedocker.Install with these
	// options): Stack.Docker. Nil installs none, as for fakes that several boxes
	// share, each with a docker of its own.
	Docker *fakedocker.Options
}

// Stack is a fake OpenBao and a fake tenancy wired together, and a fake docker when
// Options.Docker asks for one: tenancy accepts the OpenBao tokens of an environment as
// bearers and mints its lease grants there. The fields are the whole fakes; their
// methods are safe for concurrent use.
type Stack struct {
	// Tenancy is the fake tenancy: Tenancy.URL() is the agent's tenancy.url.
	Tenancy *faketenancy.Server
	// Bao is the fake OpenBao: Bao.URL() is the agent's bao.addr, Bao.MintGrant(env)
	// a bootstrap grant.
	Bao *fakebao.Server
	// Docker is the fake docker: Docker.Env() is the agent's docker environment. Nil
	// without Options.Docker.
	Docker *fakedocker.Docker
}

// Start starts tenancy and OpenBao on loopback and, with Options.Docker, installs the
// fake docker (ctx bounds its build). Stop them with Close.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	bao, err := fakebao.Start(fakebao.Options{TokenTTL: opts.TokenTTL, Now: opts.Now, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	s := &Stack{Bao: bao}
	s.Tenancy, err = faketenancy.Start(faketenancy.Options{
		Authority: bao, LeaseBudget: opts.LeaseBudget, LeaseWindow: opts.LeaseWindow,
		NextCheckin: opts.NextCheckin, Now: opts.Now, Logger: opts.Logger,
	})
	if err == nil && opts.Docker != nil {
		s.Docker, err = fakedocker.Install(ctx, *opts.Docker)
	}
	if err != nil {
		_ = s.Close() // the start error is the one to report
		return nil, err
	}
	return s, nil
}

// Close stops the fakes and closes their connections; the fake docker's error, if
// any, is returned.
func (s *Stack) Close() error {
	if s.Tenancy != nil {
		s.Tenancy.Close()
	}
	s.Bao.Close()
	if s.Docker != nil {
		if err := s.Docker.Close(); err != nil {
			return fmt.Errorf("fakestack: %w", err)
		}
	}
	return nil
}

// Login logs into the fake OpenBao with a fresh grant of envID (which supersedes the
// environment's earlier grants), as the agent's bootstrap does, and returns the live
// token: a bearer of envID for tenancy.
func (s *Stack) Login(ctx context.Context, envID string) (string, error) {
	return admin.Login(ctx, http.DefaultClient, s.Bao.URL(), s.Bao.MintGrant(envID))
}

// AdminHandler returns the admin HTTP API over tenancy and OpenBao (docs/FAKES.md),
// e.g. to serve it with net/http/httptest; cmd/monky-fakes serves the same API.
func (s *Stack) AdminHandler() http.Handler { return admin.New(s.Tenancy, s.Bao, nil) }
