package tenancy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/secret/secrettest"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/testbox/codetest"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

const env = "env-dev-01"

type fixture struct {
	fake  *faketenancy.Server
	auth  *faketenancy.MemoryAuthority
	token string
	reg   *secrettest.Recorder
	logs  *bytes.Buffer
	c     *tenancy.Client
}

func newFixture(t *testing.T, mutate func(*tenancy.Config)) *fixture {
	t.Helper()
	auth := faketenancy.NewMemoryAuthority()
	fake := faketenancy.New(faketenancy.Options{Authority: auth})
	t.Cleanup(fake.Close)
	f := &fixture{fake: fake, auth: auth, token: auth.Token(env), reg: &secrettest.Recorder{}, logs: &bytes.Buffer{}}
	cfg := tenancy.Config{
		BaseURL:    fake.URL(),
		HTTPClient: &http.Client{},
		Token:      func(context.Context) (secret.Value, error) { return secret.New(f.token), nil },
		UserAgent:  "monky-deployd/9.9.9",
		Secrets:    f.reg,
		Logger:     slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := tenancy.New(cfg)
	require.NoError(t, err)
	f.c = c
	return f
}

func (f *fixture) publish(t *testing.T, serial int64) faketenancy.Bundle {
	t.Helper()
	return f.publishGzip(t, serial, false)
}

func (f *fixture) publishGzip(t *testing.T, serial int64, gz bool) faketenancy.Bundle {
	t.Helper()
	b := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: env, Serial: serial, Gzip: gz})
	sha, got, err := f.fake.PublishBundle(env, b.Data)
	require.NoError(t, err)
	require.Equal(t, b.SHA, sha)
	require.Equal(t, serial, got)
	return b
}

func TestNewConfig(t *testing.T) {
	tok := func(context.Context) (secret.Value, error) { return secret.New("t"), nil }
	tests := []struct {
		name  string
		cfg   tenancy.Config
		field string
	}{
		{"no_base", tenancy.Config{HTTPClient: http.DefaultClient, Token: tok}, "BaseURL is required"},
		{"relative", tenancy.Config{BaseURL: "tenancy.monky.internal", HTTPClient: http.DefaultClient, Token: tok}, "BaseURL"},
		{"ftp", tenancy.Config{BaseURL: "ftp://x", HTTPClient: http.DefaultClient, Token: tok}, "BaseURL"},
		{"userinfo", tenancy.Config{BaseURL: "https://u:p@x", HTTPClient: http.DefaultClient, Token: tok}, "user info"},
		{"no_client", tenancy.Config{BaseURL: "https://x", Token: tok}, "HTTPClient"},
		{"no_token", tenancy.Config{BaseURL: "https://x", HTTPClient: http.DefaultClient}, "Token"},
		{"negative", tenancy.Config{BaseURL: "https://x", HTTPClient: http.DefaultClient, Token: tok, Timeout: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tenancy.New(tt.cfg)
			require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
	_, err := tenancy.New(tenancy.Config{BaseURL: "https://tenancy.monky.internal/prefix/", HTTPClient: http.DefaultClient, Token: tok})
	require.NoError(t, err)
}

func TestCheckinAgainstFake(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	req := tenancy.Checkin{EnvID: env, AgentVersion: "9.9.9", CurrentSHA: strings.Repeat("b", 64), CurrentSerial: 3,
		LastResult: tenancy.ResultFailed, LastCode: "UNHEALTHY", Host: tenancy.Host{Hostname: "box-1", DockerVersion: "27.3.1", FreeMB: 2048}}

	checkin := func(want tenancy.Instruction) {
		t.Helper()
		ins, err := f.c.Checkin(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, want, ins)
	}
	checkin(tenancy.Instruction{Action: tenancy.ActionNone, NextCheckin: time.Minute})
	b := f.publish(t, 1)
	checkin(tenancy.Instruction{Action: tenancy.ActionApply, SHA: b.SHA, Serial: 1, NextCheckin: time.Minute})
	f.fake.SetDesired(env, faketenancy.Desired{Action: "apply", SHA: b.SHA, Retry: true, Rollback: true, Purge: true})
	checkin(tenancy.Instruction{Action: tenancy.ActionApply, SHA: b.SHA, Serial: 1, Retry: true, Rollback: true, NextCheckin: time.Minute})
	f.fake.SetDesired(env, faketenancy.Desired{Action: "down", Purge: true})
	checkin(tenancy.Instruction{Action: tenancy.ActionDown, Purge: true, NextCheckin: time.Minute})

	got := f.fake.Checkins(env)
	require.Len(t, got, 4)
	assert.Equal(t, faketenancy.CheckinRequest{EnvID: env, AgentVersion: "9.9.9", CurrentSHA: req.CurrentSHA, CurrentSerial: 3,
		LastResult: "failed", LastCode: "UNHEALTHY", Host: faketenancy.Host{Hostname: "box-1", DockerVersion: "27.3.1", FreeMB: 2048},
		UserAgent: "monky-deployd/9.9.9", Time: got[0].Time}, got[0])
	assert.NotContains(t, f.logs.String(), f.token)
}

func TestBundleAgainstFake(t *testing.T) {
	for _, gz := range []bool{false, true} {
		f := newFixture(t, nil)
		b := f.publishGzip(t, 1, gz)
		var buf bytes.Buffer
		n, err := f.c.Bundle(t.Context(), b.SHA, &buf)
		require.NoError(t, err)
		assert.Equal(t, int64(len(b.Data)), n)
		assert.Equal(t, b.Data, buf.Bytes())
	}
}

func TestBundleErrors(t *testing.T) {
	t.Run("too_large_announced", func(t *testing.T) {
		f := newFixture(t, func(c *tenancy.Config) { c.MaxBundleSize = 100 })
		b := f.publish(t, 1)
		var buf bytes.Buffer
		_, err := f.c.Bundle(t.Context(), b.SHA, &buf)
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrBundleTooLarge, codes.BundleMalformed)
		assert.Zero(t, buf.Len(), "an announced size over the cap is refused before reading")
	})
	t.Run("too_large_streamed", func(t *testing.T) {
		const limit = 64 << 10
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-tar")
			chunk := bytes.Repeat([]byte{'x'}, 4096)
			for i := 0; i < 1024; i++ { // 4 MiB, chunked: no Content-Length
				if _, err := w.Write(chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}, func(c *tenancy.Config) { c.MaxBundleSize = limit })
		cw := &countingWriter{}
		n, err := c.Bundle(t.Context(), strings.Repeat("a", 64), cw)
		require.ErrorIs(t, err, tenancy.ErrBundleTooLarge)
		assert.LessOrEqual(t, n, int64(limit))
		assert.Equal(t, n, cw.n)
	})
	f := newFixture(t, nil) // shared by the subtests below
	b := f.publish(t, 1)
	t.Run("exactly_the_cap", func(t *testing.T) {
		f2 := newFixture(t, func(c *tenancy.Config) { c.MaxBundleSize = int64(len(b.Data)) })
		_, _, err := f2.fake.PublishBundle(env, b.Data)
		require.NoError(t, err)
		n, err := f2.c.Bundle(t.Context(), b.SHA, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, int64(len(b.Data)), n)
	})
	t.Run("unknown_sha_is_protocol", func(t *testing.T) {
		_, err := f.c.Bundle(t.Context(), strings.Repeat("0", 64), io.Discard)
		ae := codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrProtocol, codes.TenancyProtocol)
		assert.Equal(t, http.StatusNotFound, ae.Status)
		assert.Equal(t, "BUNDLE_NOT_FOUND", ae.ServerCode)
	})
	t.Run("writer_fails", func(t *testing.T) {
		_, err := f.c.Bundle(t.Context(), b.SHA, failingWriter{})
		require.ErrorIs(t, err, errDiskFull)
		assert.Equal(t, codes.Code(""), codes.Of(err), "the writer's failure is no condition of tenancy's")
	})
	t.Run("bad_sha_not_sent", func(t *testing.T) {
		before := len(f.fake.Requests())
		_, err := f.c.Bundle(t.Context(), "../../etc/passwd", io.Discard)
		require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
		assert.Len(t, f.fake.Requests(), before)
	})
	t.Run("truncated_is_unavailable", func(t *testing.T) {
		f.fake.SetFaults(faketenancy.Faults{TruncateBundle: true})
		_, err := f.c.Bundle(t.Context(), b.SHA, io.Discard)
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrUnavailable, codes.Unavailable)
	})
}

var errDiskFull = errors.New("disk full")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func TestLeaseAgainstFake(t *testing.T) {
	f := newFixture(t, nil)
	b := f.publish(t, 1)
	l, err := f.c.Lease(t.Context(), env, b.SHA)
	require.NoError(t, err)
	assert.Equal(t, f.auth.LiveGrant(env), l.Grant.Reveal())
	assert.Contains(t, f.reg.Values(), l.Grant.Reveal(), "the grant is registered")
	assert.Equal(t, "jwt-tenancy", l.AuthMount)
	assert.True(t, l.ExpiresAt.After(time.Now()))

	t.Run("request id", func(t *testing.T) {
		before := len(f.fake.Leases(env))
		again, err := f.c.RequestLease(t.Context(), tenancy.LeaseRequest{EnvID: env, SHA: b.SHA, RequestID: "req-1_A"})
		require.NoError(t, err)
		same, err := f.c.RequestLease(t.Context(), tenancy.LeaseRequest{EnvID: env, SHA: b.SHA, RequestID: "req-1_A"})
		require.NoError(t, err)
		assert.Equal(t, again.Grant.Reveal(), same.Grant.Reveal(), "the same request id: the same lease")
		leases := f.fake.Leases(env)
		require.Len(t, leases, before+1)
		assert.Equal(t, "req-1_A", leases[len(leases)-1].RequestID, "the request id is sent")
		for _, bad := range []string{"a b", "ü", strings.Repeat("x", 65), "a/b"} {
			_, err := f.c.RequestLease(t.Context(), tenancy.LeaseRequest{EnvID: env, SHA: b.SHA, RequestID: bad})
			require.ErrorIs(t, err, tenancy.ErrInvalidArgument, "%q", bad)
		}
		assert.Len(t, f.fake.Leases(env), before+1, "a refused id is never sent")
	})

	for _, shape := range []string{"approle", "wrapped"} {
		t.Run(shape, func(t *testing.T) {
			f.fake.SetFaults(faketenancy.Faults{LeaseShape: shape})
			_, err := f.c.Lease(t.Context(), env, b.SHA)
			codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrLeaseShape, codes.LeaseShape)
			assert.Contains(t, f.reg.Values(), f.auth.LiveGrant(env), "the refused shape's secret is registered")
			assert.NotContains(t, err.Error(), f.auth.LiveGrant(env))
		})
	}
	f.fake.SetFaults(faketenancy.Faults{})

	t.Run("budget", func(t *testing.T) {
		// The good lease, the request id's and the two refused shapes above were
		// granted: 4 + 1 = 5.
		_, err := f.c.Lease(t.Context(), env, b.SHA)
		require.NoError(t, err)
		_, err = f.c.Lease(t.Context(), env, b.SHA)
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrRateLimited, codes.RateLimited)
		d, ok := tenancy.RetryAfter(err)
		require.True(t, ok)
		assert.Greater(t, d, 59*time.Minute)
		assert.LessOrEqual(t, d, time.Hour)
	})
}

func TestReportAgainstFake(t *testing.T) {
	f := newFixture(t, nil)
	sha := strings.Repeat("c", 64)
	err := f.c.Report(t.Context(), tenancy.Report{EnvID: env, SHA: sha, Serial: 4, Result: tenancy.ResultFailed,
		Code: codes.Unhealthy, Detail: "service web is unhealthy", Tail: "web | crash\n",
		Services: []tenancy.ServiceState{{Name: "web", State: "running", Health: "unhealthy"}}, Duration: 2500 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, f.c.Report(t.Context(), tenancy.Report{EnvID: env, Result: tenancy.ResultDown}))
	r, err := f.fake.WaitReport(t.Context(), env, 2)
	require.NoError(t, err)
	assert.Equal(t, "down", r.Result)
	assert.Equal(t, []faketenancy.ServiceState{}, r.Services, "services is [] on the wire, never null")
	first := f.fake.Reports(env)[0]
	first.Time = time.Time{}
	assert.Equal(t, faketenancy.Report{EnvID: env, SHA: sha, Serial: 4, Result: "failed", Code: "UNHEALTHY",
		Detail: "service web is unhealthy", Tail: "web | crash\n",
		Services: []faketenancy.ServiceState{{Name: "web", State: "running", Health: "unhealthy"}}, DurationMS: 2500}, first)

	err = f.c.Report(t.Context(), tenancy.Report{EnvID: env, Result: "up"})
	require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
}

// TestWireGolden pins the exact request bodies.
func TestWireGolden(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(data))
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/agent/checkin":
			_, _ = io.WriteString(w, `{"action":"none","next_checkin_s":60}`)
		case "/v1/agent/report":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusTeapot)
		}
	}, nil)
	_, err := c.Checkin(t.Context(), tenancy.Checkin{EnvID: env, AgentVersion: "0.1.0", Host: tenancy.Host{Hostname: "h", DockerVersion: "27", FreeMB: 10}})
	require.NoError(t, err)
	_, err = c.Lease(t.Context(), env, strings.Repeat("e", 64))
	require.ErrorIs(t, err, tenancy.ErrProtocol)
	require.NoError(t, c.Report(t.Context(), tenancy.Report{EnvID: env, SHA: strings.Repeat("e", 64), Serial: 2, Result: tenancy.ResultApplied,
		Services: []tenancy.ServiceState{{Name: "app", State: "running", Health: "healthy"}}, Duration: 1500 * time.Millisecond}))
	_, err = c.Checkin(t.Context(), tenancy.Checkin{EnvID: env, AgentVersion: "0.1.0", CurrentSHA: strings.Repeat("e", 64), CurrentSerial: 2,
		LastResult: tenancy.ResultApplied, Host: tenancy.Host{Hostname: "h", DockerVersion: "27", FreeMB: 10},
		Live: &tenancy.Live{ObservedAt: time.Date(2026, 3, 4, 11, 22, 33, 123456789, time.FixedZone("CET", 3600)), Healthy: false,
			Services: []tenancy.LiveService{
				{Name: "app", State: "running", Health: "unhealthy", Restarts: 3},
				{Name: "migrate", State: "exited", ExitCode: 1},
				{Name: "worker", State: "missing"},
			}}})
	require.NoError(t, err)
	for i, name := range []string{"checkin", "lease", "report", "checkin_live"} {
		golden.AssertJSON(t, "request_"+name+".golden.json", []byte(bodies[i]+"\n"))
	}
}

// serve starts h as tenancy for the test's duration and returns a client of it (bearer "tok").
func serve(t *testing.T, h http.HandlerFunc, mutate func(*tenancy.Config)) *tenancy.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return client(t, srv.URL, "tok", nil, mutate)
}

func client(t *testing.T, base, token string, reg secret.Registry, mutate func(*tenancy.Config)) *tenancy.Client {
	t.Helper()
	cfg := tenancy.Config{BaseURL: base, HTTPClient: &http.Client{}, Secrets: reg, UserAgent: "monky-deployd/test",
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil }}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := tenancy.New(cfg)
	require.NoError(t, err)
	return c
}

func TestHeaders(t *testing.T) {
	const token = "hvs.headers-check-token"
	var mu sync.Mutex
	var seen []http.Header
	deadlines := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c := client(t, srv.URL, token, nil, func(cfg *tenancy.Config) {
		cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if _, ok := r.Context().Deadline(); ok {
				mu.Lock()
				deadlines++
				mu.Unlock()
			}
			return http.DefaultTransport.RoundTrip(r)
		})}
	})
	ctx := context.Background() // no deadline of its own: the client sets one
	sha := strings.Repeat("f", 64)
	_, err1 := c.Checkin(ctx, tenancy.Checkin{EnvID: env})
	_, err2 := c.Bundle(ctx, sha, io.Discard)
	_, err3 := c.Lease(ctx, env, sha)
	err4 := c.Report(ctx, tenancy.Report{EnvID: env, Result: tenancy.ResultApplied})
	_, err5 := c.Signature(ctx, sha)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		require.ErrorIs(t, err, tenancy.ErrUnavailable)
	}
	require.Len(t, seen, 5)
	assert.Equal(t, 5, deadlines, "every call runs under a deadline")
	accepts := []string{"application/json", "application/x-tar, application/gzip, application/octet-stream", "application/json", "application/json", "text/plain"}
	for i, h := range seen {
		assert.Equal(t, accepts[i], h.Get("Accept"), "call %d", i+1)
	}
	for _, h := range seen {
		assert.Equal(t, "Bearer "+token, h.Get("Authorization"))
		assert.Equal(t, "monky-deployd/test", h.Get("User-Agent"))
		assert.Equal(t, "application/json", h.Get("Content-Type"))
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestStatusMapping(t *testing.T) {
	tests := []struct {
		name             string
		status           int
		body, retryAfter string
		kind             error
		code             codes.Code
		wantAfter        time.Duration
	}{
		{"401", 401, `{"error":{"code":"UNAUTHENTICATED","message":"token expired"}}`, "", tenancy.ErrUnauthenticated, "UNAUTHENTICATED", 0},
		{"409", 409, `{"error":{"code":"AGENT_ENV_MISMATCH","message":"token of env-dev-02"}}`, "", tenancy.ErrEnvMismatch, "AGENT_ENV_MISMATCH", 0},
		{"409_no_body", 409, ``, "", tenancy.ErrEnvMismatch, "AGENT_ENV_MISMATCH", 0},
		{"403_env", 403, `{"error":{"code":"AGENT_ENV_MISMATCH","message":"x"}}`, "", tenancy.ErrEnvMismatch, "AGENT_ENV_MISMATCH", 0},
		{"403_other", 403, `{"error":{"code":"FORBIDDEN","message":"x"}}`, "", tenancy.ErrProtocol, "TENANCY_PROTOCOL", 0},
		{"429_seconds", 429, `{"error":{"code":"RATE_LIMITED","message":"budget"}}`, "120", tenancy.ErrRateLimited, "RATE_LIMITED", 2 * time.Minute},
		{"429_date", 429, ``, time.Now().Add(10 * time.Minute).UTC().Format(http.TimeFormat), tenancy.ErrRateLimited, "RATE_LIMITED", 10 * time.Minute},
		{"429_no_header", 429, ``, "", tenancy.ErrRateLimited, "RATE_LIMITED", 0},
		{"500", 500, `oops`, "", tenancy.ErrUnavailable, "UNAVAILABLE", 0},
		{"502", 502, `<html>bad gateway</html>`, "", tenancy.ErrUnavailable, "UNAVAILABLE", 0},
		{"503_retry", 503, ``, "30", tenancy.ErrUnavailable, "UNAVAILABLE", 30 * time.Second},
		{"408", 408, ``, "", tenancy.ErrUnavailable, "UNAVAILABLE", 0},
		{"400", 400, `{"error":{"code":"BAD_REQUEST","message":"env_id"}}`, "", tenancy.ErrProtocol, "TENANCY_PROTOCOL", 0},
		{"404", 404, ``, "", tenancy.ErrProtocol, "TENANCY_PROTOCOL", 0},
		{"200_for_report_ok", 0, ``, "", nil, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				if tt.status == 0 {
					w.WriteHeader(http.StatusOK)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}, nil)
			err := c.Report(t.Context(), tenancy.Report{EnvID: env, Result: tenancy.ResultApplied})
			if tt.kind == nil {
				require.NoError(t, err)
				return
			}
			ae := codetest.RequireCoded[*tenancy.APIError](t, err, tt.kind, tt.code)
			assert.Equal(t, "report", ae.Op)
			assert.Equal(t, tt.status, ae.Status)
			d, ok := tenancy.RetryAfter(err)
			assert.Equal(t, tt.wantAfter > 0, ok)
			assert.InDelta(t, tt.wantAfter.Seconds(), d.Seconds(), 2)
		})
	}
}

func TestNetworkFailuresAreTemporary(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // its port now refuses connections
		_, err := client(t, srv.URL, "tok", nil, nil).Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrUnavailable, codes.Unavailable)
		var op *net.OpError
		assert.ErrorAs(t, err, &op, "the cause stays reachable")
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFixture(t, func(c *tenancy.Config) { c.Timeout = 100 * time.Millisecond })
		f.fake.SetFaults(faketenancy.Faults{Delay: map[string]time.Duration{"checkin": 5 * time.Second}})
		start := time.Now()
		_, err := f.c.Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrUnavailable, codes.Unavailable)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 3*time.Second)
	})
	t.Run("reset", func(t *testing.T) {
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				_ = conn.Close()
			}
		}, nil)
		_, err := c.Lease(t.Context(), env, strings.Repeat("a", 64))
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrUnavailable, codes.Unavailable)
	})
	t.Run("bearer_of_other_env", func(t *testing.T) {
		f := newFixture(t, nil)
		f.token = f.auth.Token("env-dev-02")
		_, err := f.c.Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrEnvMismatch, codes.AgentEnvMismatch)
	})
	t.Run("revoked_bearer", func(t *testing.T) {
		f := newFixture(t, nil)
		f.auth.Revoke(f.token)
		_, err := f.c.Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		require.ErrorIs(t, err, tenancy.ErrUnauthenticated)
	})
	t.Run("token_source_fails", func(t *testing.T) {
		errNoToken := errors.New("no token file")
		c := client(t, "http://127.0.0.1:1", "", nil, func(c *tenancy.Config) {
			c.Token = func(context.Context) (secret.Value, error) { return secret.Value{}, errNoToken }
		})
		_, err := c.Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		require.ErrorIs(t, err, errNoToken)
	})
	t.Run("empty_token", func(t *testing.T) {
		c := client(t, "http://127.0.0.1:1", "", nil, nil)
		_, err := c.Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		require.ErrorIs(t, err, tenancy.ErrUnauthenticated)
	})
}

// TestNoSecretInErrorsOrLogs runs servers that echo the bearer and the grant back and
// checks that neither reaches an error text or a log line.
func TestNoSecretInErrorsOrLogs(t *testing.T) {
	t.Run("fake_echoes_bearer", func(t *testing.T) {
		f := newFixture(t, nil)
		f.fake.SetFaults(faketenancy.Faults{EchoBearer: true, Status: map[string]int{"checkin": 500, "lease": 429, "report": 401, "bundle": 409}})
		sha := strings.Repeat("a", 64)
		_, e1 := f.c.Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		_, e2 := f.c.Lease(t.Context(), env, sha)
		e3 := f.c.Report(t.Context(), tenancy.Report{EnvID: env, Result: tenancy.ResultApplied})
		_, e4 := f.c.Bundle(t.Context(), sha, io.Discard)
		for _, err := range []error{e1, e2, e3, e4} {
			require.Error(t, err)
			assert.NotContains(t, err.Error(), f.token)
			assert.NotContains(t, err.Error(), strings.TrimPrefix(f.token, "hvs."))
			assert.NotContains(t, err.Error()+"", "Bearer")
		}
		assert.NotContains(t, f.logs.String(), f.token)
	})
	t.Run("raw_echo_server", func(t *testing.T) {
		const token = "plain-bearer-with-no-known-shape!"
		const grant = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJlbnYtZGV2LTAxIn0.c2lnbmF0dXJlLXh5eg"
		var logs bytes.Buffer
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			msg := "you sent " + r.Header.Get("Authorization") + " and the grant " + grant
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "ECHO " + token, "message": msg}})
		}, func(c *tenancy.Config) {
			c.Token = func(context.Context) (secret.Value, error) { return secret.New(token), nil }
			c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
		_, err := c.Checkin(t.Context(), tenancy.Checkin{EnvID: env})
		ae := codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrProtocol, codes.TenancyProtocol)
		for _, s := range []string{token, grant, "ECHO"} {
			assert.NotContains(t, err.Error(), s)
			assert.NotContains(t, logs.String(), s)
		}
		assert.Empty(t, ae.ServerCode, "a code that does not look like one is dropped")
		assert.Contains(t, ae.Message, "you sent Bearer [REDACTED]")
	})
}

func TestRedirectNotFollowed(t *testing.T) {
	var leaked sync.Map
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store("auth", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	caller := &http.Client{}
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}, func(cfg *tenancy.Config) { cfg.HTTPClient = caller })
	err := c.Report(t.Context(), tenancy.Report{EnvID: env, Result: tenancy.ResultApplied})
	ae := codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrProtocol, codes.TenancyProtocol)
	assert.Equal(t, http.StatusTemporaryRedirect, ae.Status)
	_, contacted := leaked.Load("auth")
	assert.False(t, contacted, "the redirect target was never contacted")
	assert.Nil(t, caller.CheckRedirect, "the caller's client is not modified")
}

// TestSignatureAgainstFake: its subtests share one fake, in order.
func TestSignatureAgainstFake(t *testing.T) {
	f := newFixture(t, nil)
	b := f.publish(t, 1)
	t.Run("unsigned_is_an_answer", func(t *testing.T) {
		got, err := f.c.Signature(t.Context(), b.SHA)
		require.NoError(t, err)
		assert.Equal(t, tenancy.Signature{Unsigned: true}, got)
	})
	t.Run("empty_file_is_signed_but_empty", func(t *testing.T) {
		require.NoError(t, f.fake.PublishSignature(env, b.SHA, nil))
		got, err := f.c.Signature(t.Context(), b.SHA)
		require.NoError(t, err)
		assert.False(t, got.Unsigned)
		assert.Empty(t, got.Data)
	})
	t.Run("ok", func(t *testing.T) {
		sig := []byte("monky-deployd signature v1\nalg ed25519\n")
		require.NoError(t, f.fake.PublishSignature(env, b.SHA, sig))
		got, err := f.c.Signature(t.Context(), b.SHA)
		require.NoError(t, err)
		assert.Equal(t, tenancy.Signature{Data: sig}, got, "byte for byte")
	})
	t.Run("other_env_is_env_mismatch", func(t *testing.T) {
		other, err := faketenancy.BuildBundle(faketenancy.BundleSpec{EnvID: "env-dev-02"})
		require.NoError(t, err)
		sha, _, err := f.fake.PublishBundle("env-dev-02", other.Data)
		require.NoError(t, err)
		require.NoError(t, f.fake.PublishSignature("env-dev-02", sha, []byte("x")))
		_, err = f.c.Signature(t.Context(), sha)
		require.ErrorIs(t, err, tenancy.ErrEnvMismatch)
	})
	t.Run("bad_sha_not_sent", func(t *testing.T) {
		before := len(f.fake.Requests())
		_, err := f.c.Signature(t.Context(), "../bundles")
		require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
		assert.Len(t, f.fake.Requests(), before)
	})
	t.Run("forced_503_is_unavailable", func(t *testing.T) {
		f.fake.SetFaults(faketenancy.Faults{Status: map[string]int{"signature": 503}})
		_, err := f.c.Signature(t.Context(), b.SHA)
		ae := codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrUnavailable, codes.Unavailable)
		assert.Equal(t, "signature", ae.Op)
	})
}

func TestSignatureSize(t *testing.T) {
	sha := strings.Repeat("a", 64)
	signatureOf := func(t *testing.T, n int, announce bool) *tenancy.Client {
		return serve(t, func(w http.ResponseWriter, r *http.Request) {
			assert.Equal(t, "/v1/agent/bundles/"+sha+"/signature", r.URL.Path)
			assert.Equal(t, "text/plain", r.Header.Get("Accept"))
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if announce {
				w.Header().Set("Content-Length", strconv.Itoa(n))
			}
			w.WriteHeader(http.StatusOK)
			for i := 0; i < n; i += 1024 { // chunked when not announced
				_, _ = w.Write([]byte(strings.Repeat("s", min(1024, n-i))))
				w.(http.Flusher).Flush()
			}
		}, nil)
	}
	for _, announce := range []bool{true, false} {
		name := map[bool]string{true: "announced", false: "streamed"}[announce]
		t.Run("exactly_the_cap_"+name, func(t *testing.T) {
			got, err := signatureOf(t, tenancy.MaxSignatureSize, announce).Signature(t.Context(), sha)
			require.NoError(t, err)
			assert.Len(t, got.Data, tenancy.MaxSignatureSize)
		})
		t.Run("too_large_"+name, func(t *testing.T) {
			_, err := signatureOf(t, tenancy.MaxSignatureSize+1, announce).Signature(t.Context(), sha)
			codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrSignatureTooLarge, codes.SignatureInvalid)
			assert.Contains(t, err.Error(), "longer than 4096 bytes")
		})
	}
	t.Run("404_without_body_is_unsigned", func(t *testing.T) {
		got, err := serve(t, http.NotFound, nil).Signature(t.Context(), sha)
		require.NoError(t, err)
		assert.True(t, got.Unsigned, "a tenancy that does not know the call: unsigned, so a box that requires signatures fails closed")
	})
	t.Run("401_is_unauthenticated", func(t *testing.T) {
		unauthorized := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }
		_, err := serve(t, unauthorized, nil).Signature(t.Context(), sha)
		codetest.RequireCoded[*tenancy.APIError](t, err, tenancy.ErrUnauthenticated, codes.Unauthenticated)
	})
}

// sendCheckin posts ci (EnvID and AgentVersion filled in) to a tenancy that answers
// none and keeps the bodies it received. A refused check-in returns the error, and
// must have sent nothing; a sent one must be one body, returned as its keys.
func sendCheckin(t *testing.T, ci tenancy.Checkin) (map[string]json.RawMessage, error) {
	t.Helper()
	var mu sync.Mutex
	var bodies [][]byte
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, data)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"action":"none","next_checkin_s":60}`)
	}, nil)
	ci.EnvID, ci.AgentVersion = env, "0.1.0"
	_, err := c.Checkin(t.Context(), ci)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		assert.Empty(t, bodies, "nothing is sent")
		return nil, err
	}
	require.Len(t, bodies, 1)
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(bodies[0], &body))
	return body, nil
}

// sendLive posts a check-in carrying live and returns the body's live object as raw
// JSON, nil when the body has no "live" key.
func sendLive(t *testing.T, live *tenancy.Live) json.RawMessage {
	t.Helper()
	body, err := sendCheckin(t, tenancy.Checkin{Live: live})
	require.NoError(t, err)
	return body["live"]
}

func TestCheckinLiveCaps(t *testing.T) {
	at := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	decode := func(t *testing.T, raw json.RawMessage) (reason string, services []tenancy.LiveService) {
		t.Helper()
		var l struct {
			Reason   string                `json:"reason"`
			Services []tenancy.LiveService `json:"services"`
		}
		require.NoError(t, json.Unmarshal(raw, &l))
		return l.Reason, l.Services
	}
	t.Run("long_reason", func(t *testing.T) {
		// "é" is two bytes: the cut lands inside one unless it moves to a boundary.
		reason, _ := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Reason: "x" + strings.Repeat("é", 600)}))
		assert.LessOrEqual(t, len(reason), tenancy.MaxLiveReason)
		assert.Greater(t, len(reason), tenancy.MaxLiveReason-len(tenancy.LiveCut)-2, "the head is kept, not dropped")
		assert.True(t, utf8.ValidString(reason))
		assert.True(t, strings.HasPrefix(reason, "xéé"))
		assert.True(t, strings.HasSuffix(reason, tenancy.LiveCut))
	})
	t.Run("reason_at_the_cap", func(t *testing.T) {
		in := strings.Repeat("r", tenancy.MaxLiveReason)
		reason, _ := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Reason: in}))
		assert.Equal(t, in, reason, "a reason within the cap is sent whole")
	})
	t.Run("invalid_utf8_reason", func(t *testing.T) {
		reason, _ := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Reason: "bad \xff byte"}))
		assert.Equal(t, "bad \uFFFD byte", reason)
	})
	t.Run("many_services", func(t *testing.T) {
		in := make([]tenancy.LiveService, tenancy.MaxLiveServices+44)
		for i := range in {
			in[i] = tenancy.LiveService{Name: "svc-" + fmt.Sprintf("%04d", i), State: "running"}
		}
		live := &tenancy.Live{ObservedAt: at, Healthy: true, Services: in}
		_, got := decode(t, sendLive(t, live))
		require.Len(t, got, tenancy.MaxLiveServices)
		assert.Equal(t, in[:tenancy.MaxLiveServices], got, "the first ones are sent, in order")
		assert.Len(t, live.Services, tenancy.MaxLiveServices+44, "the caller's slice is left alone")
	})
	t.Run("worst_case_size", func(t *testing.T) {
		long := strings.Repeat("w", 4096)
		in := make([]tenancy.LiveService, 1000)
		for i := range in {
			in[i] = tenancy.LiveService{Name: long, State: long, Health: long, ExitCode: math.MinInt64, Restarts: math.MaxInt64}
		}
		raw := sendLive(t, &tenancy.Live{ObservedAt: at.Add(123456789), Healthy: true, Services: in})
		assert.LessOrEqual(t, len(raw), 125<<10, "the documented bound of a live object with printable fields")
		t.Logf("worst-case live object: %d bytes", len(raw))
	})
	t.Run("long_fields", func(t *testing.T) {
		name := strings.Repeat("n", tenancy.MaxLiveField-1) + "ü" // the cap cuts ü in two
		in := tenancy.LiveService{Name: name, State: strings.Repeat("s", 300), Health: "healthy"}
		_, got := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Healthy: true, Services: []tenancy.LiveService{in}}))
		require.Len(t, got, 1)
		assert.Equal(t, strings.Repeat("n", tenancy.MaxLiveField-1), got[0].Name)
		assert.Equal(t, strings.Repeat("s", tenancy.MaxLiveField), got[0].State)
		assert.Equal(t, "healthy", got[0].Health)
	})
}

// TestCheckinOptionalObjects: the live and deferred objects travel as docs/PROTOCOL.md
// says, with no key when nil, and one the agent must not send is refused naming its
// field.
func TestCheckinOptionalObjects(t *testing.T) {
	at := time.Date(2026, 3, 4, 11, 22, 33, 500_000_000, time.FixedZone("CET", 3600))
	utc := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	sha, since := strings.Repeat("ab", 32), time.Date(2026, 12, 4, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	live := func(l tenancy.Live) tenancy.Checkin { return tenancy.Checkin{Live: &l} }
	deferred := func(d tenancy.Deferred) tenancy.Checkin { return tenancy.Checkin{Deferred: &d} }
	tests := []struct {
		name    string
		ci      tenancy.Checkin
		key     string // the object's key in the body; "": neither is there
		want    string
		wantErr string
	}{
		{name: "nothing_live_nothing_deferred"},
		{name: "healthy", ci: live(tenancy.Live{ObservedAt: at, Healthy: true, Services: []tenancy.LiveService{
			{Name: "app", State: "running", Health: "healthy"},
		}}), key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","healthy":true,
			"services":[{"name":"app","state":"running","health":"healthy","exit_code":0,"restarts":0}]}`},
		{name: "unhealthy_with_services", ci: live(tenancy.Live{ObservedAt: at, Services: []tenancy.LiveService{
			{Name: "app", State: "restarting", Health: "unhealthy", ExitCode: 137, Restarts: 12},
			{Name: "db", State: "missing"},
		}}), key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","healthy":false,"services":[
			{"name":"app","state":"restarting","health":"unhealthy","exit_code":137,"restarts":12},
			{"name":"db","state":"missing","health":"","exit_code":0,"restarts":0}]}`},
		{name: "reason_alone", ci: live(tenancy.Live{ObservedAt: at, Healthy: true, Reason: "docker: Cannot connect to the Docker daemon"}),
			key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","reason":"docker: Cannot connect to the Docker daemon"}`},
		{name: "nil_services_as_empty_list", ci: live(tenancy.Live{ObservedAt: at, Healthy: true}),
			key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","healthy":true,"services":[]}`},
		{name: "whole_seconds_in_utc", ci: live(tenancy.Live{ObservedAt: utc, Healthy: true}),
			key: "live", want: `{"observed_at":"2026-03-04T10:00:00Z","healthy":true,"services":[]}`},
		{name: "live reason_and_services", ci: live(tenancy.Live{ObservedAt: utc, Reason: "docker: timeout",
			Services: []tenancy.LiveService{{Name: "app", State: "running"}}}), wantErr: "live.reason and live.services"},
		{name: "live service_without_name", ci: live(tenancy.Live{ObservedAt: utc, Healthy: true,
			Services: []tenancy.LiveService{{Name: "app", State: "running"}, {State: "running"}}}), wantErr: "live.services[1].name"},
		{name: "live no_observed_at", ci: live(tenancy.Live{Healthy: true}), wantErr: "live.observed_at"},
		{name: "live negative_restarts", ci: live(tenancy.Live{ObservedAt: utc, Services: []tenancy.LiveService{{Name: "app", Restarts: -1}}}),
			wantErr: "live.services[0].restarts"},
		{name: "hold", ci: deferred(tenancy.Deferred{Why: "hold", Owner: "alice", Reason: "demo at 3", Until: since.Add(2 * time.Hour),
			SHA: sha, Serial: 4, Since: since, Prepared: true}), key: "deferred",
			want: `{"why":"hold","owner":"alice","reason":"demo at 3","until":"2026-12-04T14:00:00Z","sha":"` + sha + `","serial":4,"since":"2026-12-04T12:00:00Z","prepared":true}`},
		{name: "window", ci: deferred(tenancy.Deferred{Why: "window", Until: since, SHA: sha, Serial: 1, Since: since}), key: "deferred",
			want: `{"why":"window","until":"2026-12-04T12:00:00Z","sha":"` + sha + `","serial":1,"since":"2026-12-04T12:00:00Z","prepared":false}`},
		{name: "a long reason is cut", ci: deferred(tenancy.Deferred{Why: "hold", Owner: "a", Reason: strings.Repeat("é", 150), SHA: sha, Serial: 1, Since: since}), key: "deferred",
			want: `{"why":"hold","owner":"a","reason":"` + strings.Repeat("é", 100) + `","sha":"` + sha + `","serial":1,"since":"2026-12-04T12:00:00Z","prepared":false}`},
		{name: "bad why", ci: deferred(tenancy.Deferred{Why: "lunch", SHA: sha, Serial: 1, Since: since}), wantErr: "deferred.why"},
		{name: "bad sha", ci: deferred(tenancy.Deferred{Why: "hold", SHA: "x", Serial: 1, Since: since}), wantErr: "deferred.sha"},
		{name: "no serial", ci: deferred(tenancy.Deferred{Why: "hold", SHA: sha, Since: since}), wantErr: "deferred.serial"},
		{name: "no since", ci: deferred(tenancy.Deferred{Why: "hold", SHA: sha, Serial: 1}), wantErr: "deferred.since"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := sendCheckin(t, tt.ci)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.key == "" {
				assert.NotContains(t, body, "live")
				assert.NotContains(t, body, "deferred")
				return
			}
			assert.JSONEq(t, tt.want, string(body[tt.key]))
		})
	}
}
