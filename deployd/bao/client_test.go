package bao_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/secret/secrettest"
	"github.com/monky/monky-deployd/internal/testbox/codetest"
)

const env = "env-dev-01"

func newFake(t *testing.T, opts fakebao.Options) *fakebao.Server {
	t.Helper()
	s := fakebao.New(opts)
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, addr string, reg secret.Registry) *bao.Client {
	t.Helper()
	c, err := bao.New(bao.Config{Addr: addr, EnvID: env, Secrets: reg, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return c
}

// everyCall runs each call of c, login with grant and the others with tok, and
// returns their errors by op.
func everyCall(ctx context.Context, c *bao.Client, grant string, tok secret.Value) map[string]error {
	_, login := c.Login(ctx, secret.New(grant))
	_, lookup := c.LookupSelf(ctx, tok)
	_, renew := c.RenewSelf(ctx, tok)
	revoke := c.RevokeSelf(ctx, tok)
	_, read := c.Read(ctx, tok, map[string]bao.Ref{"X": {Path: "db", Key: "k"}})
	return map[string]error{"login": login, "lookup-self": lookup, "renew-self": renew, "revoke-self": revoke, "read": read}
}

func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := deploydtest.NewClock(time.Now())
	s := newFake(t, fakebao.Options{Now: clk.Now})
	reg := &secrettest.Recorder{}
	c := newClient(t, s.URL(), reg)

	grant := s.MintGrant(env)
	info, err := c.Login(ctx, secret.New(grant))
	require.NoError(t, err)
	assert.True(t, reg.Has(grant), "grant registered")
	assert.True(t, reg.Has(info.Token.Reveal()), "token registered")
	assert.Equal(t, env, info.EnvID)
	assert.Equal(t, time.Hour, info.TTL)
	assert.Equal(t, time.Hour, info.CreationTTL)
	assert.True(t, info.Renewable)
	assert.Equal(t, []string{"default", "see-env"}, info.Policies)
	assert.NotEmpty(t, info.Accessor)
	got, ok := s.TokenEnv(info.Token.Reveal())
	require.True(t, ok)
	assert.Equal(t, env, got)

	look, err := c.LookupSelf(ctx, info.Token)
	require.NoError(t, err)
	assert.Equal(t, info.Accessor, look.Accessor)
	assert.True(t, clk.Now().Add(time.Hour).Equal(look.ExpireTime), "expire_time %v", look.ExpireTime)
	assert.False(t, look.NeedsRenew(clk.Now()))

	clk.Advance(41 * time.Minute)
	look, err = c.LookupSelf(ctx, info.Token)
	require.NoError(t, err)
	assert.Equal(t, 19*time.Minute, look.TTL)
	assert.True(t, look.NeedsRenew(clk.Now()), "19m left of 60m is below a third")

	ren, err := c.RenewSelf(ctx, info.Token)
	require.NoError(t, err)
	assert.Equal(t, time.Hour, ren.TTL)
	assert.Equal(t, info.Token, ren.Token)
	look, err = c.LookupSelf(ctx, info.Token)
	require.NoError(t, err)
	assert.Equal(t, time.Hour, look.TTL)

	require.NoError(t, c.RevokeSelf(ctx, info.Token))
	_, ok = s.TokenEnv(info.Token.Reveal())
	assert.False(t, ok)
	_, err = c.LookupSelf(ctx, info.Token)
	require.ErrorIs(t, err, bao.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "bootstrap the box again with a fresh grant")
	require.NoError(t, c.RevokeSelf(ctx, info.Token), "revoking a revoked token is done")
	require.NoError(t, c.RevokeSelf(ctx, secret.Value{}), "no token, nothing to revoke")
}

func TestTokenExpiry(t *testing.T) {
	ctx := context.Background()
	clk := deploydtest.NewClock(time.Now())
	s := newFake(t, fakebao.Options{Now: clk.Now, TokenTTL: 10 * time.Minute})
	c := newClient(t, s.URL(), nil)
	info, err := c.Login(ctx, secret.New(s.MintGrant(env)))
	require.NoError(t, err)
	clk.Advance(10 * time.Minute)
	_, err = c.LookupSelf(ctx, info.Token)
	require.ErrorIs(t, err, bao.ErrUnauthenticated)
	_, err = c.RenewSelf(ctx, info.Token)
	codetest.RequireCoded[*bao.Error](t, err, bao.ErrUnauthenticated, codes.Unauthenticated)
}

func TestNotRenewable(t *testing.T) {
	ctx := context.Background()
	s := newFake(t, fakebao.Options{NotRenewable: true})
	c := newClient(t, s.URL(), nil)
	info, err := c.Login(ctx, secret.New(s.MintGrant(env)))
	require.NoError(t, err)
	assert.False(t, info.Renewable)
	assert.False(t, info.NeedsRenew(time.Now().Add(59*time.Minute)))
	_, err = c.RenewSelf(ctx, info.Token)
	require.ErrorIs(t, err, bao.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "lease is not renewable")
}

func TestLoginRejected(t *testing.T) {
	ctx := context.Background()
	clk := deploydtest.NewClock(time.Now())
	s := newFake(t, fakebao.Options{Now: clk.Now})
	old := s.MintGrant(env)
	current := s.MintGrant(env)
	tests := []struct {
		name   string
		cfg    func(*bao.Config)
		grant  string
		detail string
	}{
		{"superseded", nil, old, "superseded"},
		{"garbage", nil, "garbage", "error validating token"},
		{"wrong role", func(c *bao.Config) { c.Role = "admin" }, current, `role "admin" could not be found`},
		{"empty grant", nil, "", "the grant is empty"},
		{"wrong mount", func(c *bao.Config) { c.AuthMount = "jwt-other" }, current, "HTTP 403"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := bao.Config{Addr: s.URL(), EnvID: env}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			c, err := bao.New(cfg)
			require.NoError(t, err)
			_, err = c.Login(ctx, secret.New(tc.grant))
			be := codetest.RequireCoded[*bao.Error](t, err, bao.ErrUnauthenticated, codes.Unauthenticated)
			assert.Equal(t, "login", be.Op)
			assert.Contains(t, err.Error(), tc.detail)
			if len(tc.grant) > 8 {
				assert.NotContains(t, err.Error(), tc.grant)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		clk.Advance(fakebao.GrantTTL)
		_, err := newClient(t, s.URL(), nil).Login(ctx, secret.New(current))
		require.ErrorIs(t, err, bao.ErrUnauthenticated)
		assert.Contains(t, err.Error(), "expired")
	})
}

func TestLoginShapes(t *testing.T) {
	for _, fault := range []string{fakebao.FaultWrapped, fakebao.FaultAppRole, fakebao.FaultNoToken, fakebao.FaultLimitedUse} {
		t.Run(fault, func(t *testing.T) {
			s := newFake(t, fakebao.Options{})
			s.SetLoginFault(fault)
			_, err := newClient(t, s.URL(), nil).Login(context.Background(), secret.New(s.MintGrant(env)))
			be := codetest.RequireCoded[*bao.Error](t, err, bao.ErrLeaseShape, codes.LeaseShape)
			assert.Equal(t, http.StatusOK, be.Status)
		})
	}
}

func TestRead(t *testing.T) {
	ctx := context.Background()
	s := newFake(t, fakebao.Options{})
	s.PutSecret(env, "db", map[string]string{"password": "pw-plant-1", "user": "app-user-plant"})
	s.PutSecret(env, "stripe/api", map[string]string{"key": "sk-plant-2"})
	s.PutSecret("env-dev-02", "db", map[string]string{"password": "pw-other-env"})
	reg := &secrettest.Recorder{}
	c := newClient(t, s.URL(), reg)
	info, err := c.Login(ctx, secret.New(s.MintGrant(env)))
	require.NoError(t, err)

	base := len(s.Requests())
	vals, err := c.Read(ctx, info.Token, map[string]bao.Ref{
		"DB_PASSWORD": {Path: "db", Key: "password"},
		"DB_USER":     {Path: "db", Key: "user"},
		"STRIPE_KEY":  {Path: "stripe/api", Key: "key"},
	})
	require.NoError(t, err)
	assert.Equal(t, "pw-plant-1", vals["DB_PASSWORD"].Reveal())
	assert.Equal(t, "app-user-plant", vals["DB_USER"].Reveal())
	assert.Equal(t, "sk-plant-2", vals["STRIPE_KEY"].Reveal())
	for _, v := range []string{"pw-plant-1", "app-user-plant", "sk-plant-2"} {
		assert.True(t, reg.Has(v), "value registered")
	}
	reqs := s.Requests()[base:]
	require.Len(t, reqs, 2, "one GET per distinct path")
	assert.Equal(t, "/v1/secret/data/envs/env-dev-01/db", reqs[0].Path)
	assert.Equal(t, "/v1/secret/data/envs/env-dev-01/stripe/api", reqs[1].Path)

	vals, err = c.Read(ctx, info.Token, nil)
	require.NoError(t, err)
	assert.Empty(t, vals)

	s.PutSecret(env, "gone", map[string]string{"k": "pw-deleted-plant"})
	s.DeleteSecret(env, "gone")
	s.PutSecret(env, "burnt", map[string]string{"k": "pw-destroyed-plant"})
	s.DestroySecret(env, "burnt")

	tests := []struct {
		name   string
		refs   map[string]bao.Ref
		kind   error
		code   codes.Code
		detail []string
	}{
		{"missing path", map[string]bao.Ref{"X": {Path: "nope", Key: "k"}}, bao.ErrSecretMissing, codes.SecretMissing,
			[]string{"variable X", "secret/data/envs/env-dev-01/nope", "does not exist"}},
		{"missing key", map[string]bao.Ref{"X": {Path: "db", Key: "nokey"}}, bao.ErrSecretMissing, codes.SecretMissing,
			[]string{"variable X", `no key "nokey"`}},
		{"deleted version", map[string]bao.Ref{"X": {Path: "gone", Key: "k"}}, bao.ErrSecretMissing, codes.SecretMissing,
			[]string{"was deleted"}},
		{"destroyed version", map[string]bao.Ref{"X": {Path: "burnt", Key: "k"}}, bao.ErrSecretMissing, codes.SecretMissing,
			[]string{"was destroyed"}},
		{"all missing are named", map[string]bao.Ref{"B": {Path: "db", Key: "x"}, "A": {Path: "nope", Key: "k"}, "OK": {Path: "db", Key: "user"}},
			bao.ErrSecretMissing, codes.SecretMissing, []string{"variable A", "variable B"}},
		{"traversal", map[string]bao.Ref{"X": {Path: "../env-dev-02/db", Key: "password"}}, bao.ErrSecretPath, codes.SecretPath,
			[]string{"variable X", `".." segment`}},
		{"absolute", map[string]bao.Ref{"X": {Path: "/db", Key: "password"}}, bao.ErrSecretPath, codes.SecretPath, []string{"starts with /"}},
		{"no key", map[string]bao.Ref{"X": {Path: "db"}}, bao.ErrSecretPath, codes.SecretPath, []string{"names no key"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.Requests())
			vals, err := c.Read(ctx, info.Token, tc.refs)
			require.Error(t, err)
			assert.Nil(t, vals)
			codetest.RequireCoded[*bao.Error](t, err, tc.kind, tc.code)
			for _, d := range tc.detail {
				assert.Contains(t, err.Error(), d)
			}
			for _, v := range []string{"pw-plant-1", "app-user-plant", "pw-deleted-plant", "pw-destroyed-plant"} {
				assert.NotContains(t, err.Error(), v)
			}
			assert.NotContains(t, err.Error(), info.Token.Reveal())
			if errors.Is(tc.kind, bao.ErrSecretPath) {
				assert.Equal(t, before, len(s.Requests()), "a refused reference costs no request")
			}
		})
	}

	t.Run("another env's token is denied", func(t *testing.T) {
		other, err := bao.New(bao.Config{Addr: s.URL(), EnvID: "env-dev-02"})
		require.NoError(t, err)
		// A token of env-dev-01 used by a client pinned to env-dev-02: the server's
		// policy refuses it.
		_, err = other.Read(ctx, info.Token, map[string]bao.Ref{"P": {Path: "db", Key: "password"}})
		be := codetest.RequireCoded[*bao.Error](t, err, bao.ErrSecretDenied, codes.SecretDenied)
		assert.Equal(t, http.StatusForbidden, be.Status)
		assert.Equal(t, "P", be.Var)
		assert.Equal(t, "secret/data/envs/env-dev-02/db", be.Path)
		assert.NotContains(t, err.Error(), "pw-other-env")
	})
	t.Run("invalidated token is denied", func(t *testing.T) {
		s.InvalidateTokens(env)
		_, err := c.Read(ctx, info.Token, map[string]bao.Ref{"P": {Path: "db", Key: "password"}})
		require.ErrorIs(t, err, bao.ErrSecretDenied)
	})
}

func TestSealedAndUnreachable(t *testing.T) {
	ctx := context.Background()
	s := newFake(t, fakebao.Options{})
	c := newClient(t, s.URL(), nil)
	info, err := c.Login(ctx, secret.New(s.MintGrant(env)))
	require.NoError(t, err)
	s.SetSealed(true)
	for name, err := range everyCall(ctx, c, s.MintGrant(env), info.Token) {
		t.Run("sealed "+name, func(t *testing.T) {
			assert.Contains(t, err.Error(), "OpenBao is sealed")
			be := codetest.RequireCoded[*bao.Error](t, err, bao.ErrUnavailable, codes.Unavailable)
			assert.Equal(t, http.StatusServiceUnavailable, be.Status)
		})
	}
	s.SetSealed(false)
	_, err = c.LookupSelf(ctx, info.Token)
	require.NoError(t, err)

	t.Run("refused", func(t *testing.T) {
		hs := httptest.NewServer(http.NotFoundHandler())
		hs.Close() // its port now refuses connections
		_, err := newClient(t, hs.URL, nil).LookupSelf(ctx, info.Token)
		codetest.RequireCoded[*bao.Error](t, err, bao.ErrUnavailable, codes.Unavailable)
		assert.Contains(t, err.Error(), "cannot reach OpenBao")
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(hs.Close)
		t.Cleanup(func() { close(release) })
		c, err := bao.New(bao.Config{Addr: hs.URL, EnvID: env, Timeout: 100 * time.Millisecond})
		require.NoError(t, err)
		_, err = c.LookupSelf(ctx, info.Token)
		codetest.RequireCoded[*bao.Error](t, err, bao.ErrUnavailable, codes.Unavailable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// TestStatusMapping drives every call through the statuses OpenBao can answer.
func TestStatusMapping(t *testing.T) {
	ctx := context.Background()
	var status atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := int(status.Load())
		if st >= 300 && st < 400 {
			w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		_, _ = io.WriteString(w, `{"errors":["status says it"]}`)
	}))
	t.Cleanup(hs.Close)
	c := newClient(t, hs.URL, nil)
	tok := secret.New("s.tokenUNDERtestXXXXXXXXX")
	tests := []struct {
		status int
		login  error
		token  error // lookup-self and renew-self
		read   error
	}{
		{400, bao.ErrUnauthenticated, bao.ErrUnauthenticated, bao.ErrSecretDenied},
		{401, bao.ErrUnauthenticated, bao.ErrUnauthenticated, bao.ErrSecretDenied},
		{403, bao.ErrUnauthenticated, bao.ErrUnauthenticated, bao.ErrSecretDenied},
		{307, bao.ErrUnavailable, bao.ErrUnavailable, bao.ErrUnavailable},
		{429, bao.ErrUnavailable, bao.ErrUnavailable, bao.ErrUnavailable},
		{500, bao.ErrUnavailable, bao.ErrUnavailable, bao.ErrUnavailable},
		{502, bao.ErrUnavailable, bao.ErrUnavailable, bao.ErrUnavailable},
		{503, bao.ErrUnavailable, bao.ErrUnavailable, bao.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			status.Store(int32(tc.status))
			errs := everyCall(ctx, c, "grant", tok)
			assert.ErrorIs(t, errs["login"], tc.login, "login")
			assert.ErrorIs(t, errs["lookup-self"], tc.token, "lookup-self")
			assert.ErrorIs(t, errs["renew-self"], tc.token, "renew-self")
			assert.ErrorIs(t, errs["read"], tc.read, "read")
			var be *bao.Error
			require.ErrorAs(t, errs["read"], &be)
			assert.Equal(t, tc.status, be.Status)
		})
	}
}

// TestServerEchoesCredentials: a server that quotes the JWT, the token and a secret
// value in its error bodies; no error text carries them.
func TestServerEchoesCredentials(t *testing.T) {
	ctx := context.Background()
	s := newFake(t, fakebao.Options{})
	grant := s.MintGrant(env)
	tok := "s.echoTOKENechoTOKENecho1"
	for _, body := range []string{
		`{"errors":["invalid JWT %s; token %s"]}`,
		`{"errors":["%s","%s"]}`,
		`not json: %s %s`,
		`{"errors":["prefix-%s-suffix:%s"]}`,
	} {
		t.Run(body, func(t *testing.T) {
			for _, st := range []int{400, 403, 500, 503} {
				hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(st)
					_, _ = fmt.Fprintf(w, body, grant, tok)
				}))
				errs := everyCall(ctx, newClient(t, hs.URL, nil), grant, secret.New(tok))
				hs.Close()
				for op, err := range errs {
					if st == 403 && op == "revoke-self" {
						assert.NoError(t, err, "revoke of a rejected token")
						continue
					}
					require.Error(t, err)
					text := err.Error() + fmt.Sprintf("%+v %#v", err, err)
					assert.NotContains(t, text, grant)
					assert.NotContains(t, text, tok)
					assert.NotContains(t, text, grant[:20])
				}
			}
		})
	}
}

// TestImmuneToVaultEnv sets every VAULT_* variable that vault/api reads, pointing at
// a decoy, and shows the client talks only to the configured address and sends only
// the headers it was given.
func TestImmuneToVaultEnv(t *testing.T) {
	var decoyHits atomic.Int32
	decoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decoyHits.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(decoy.Close)

	s := newFake(t, fakebao.Options{})
	s.PutSecret(env, "db", map[string]string{"password": "pw"})
	var mu sync.Mutex
	var seen []http.Header
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	for _, variant := range []struct {
		name string
		vals map[string]string
	}{
		{"decoy values", map[string]string{
			"VAULT_CACERT": "", "VAULT_CAPATH": "", "VAULT_CLIENT_CERT": "", "VAULT_CLIENT_KEY": "",
			"VAULT_MAX_RETRIES": "7", "VAULT_CLIENT_TIMEOUT": "1", "VAULT_RATE_LIMIT": "0.001:1",
			"VAULT_SKIP_VERIFY": "true", "VAULT_SRV_LOOKUP": "true", "VAULT_DISABLE_REDIRECTS": "false",
		}},
		{"malformed values", map[string]string{
			"VAULT_CACERT": "/nonexistent/ca.pem", "VAULT_CAPATH": "/nonexistent", "VAULT_CLIENT_CERT": "/nonexistent/c.pem",
			"VAULT_CLIENT_KEY": "/nonexistent/k.pem", "VAULT_MAX_RETRIES": "many", "VAULT_CLIENT_TIMEOUT": "soon",
			"VAULT_RATE_LIMIT": "fast", "VAULT_SKIP_VERIFY": "maybe", "VAULT_SRV_LOOKUP": "perhaps",
			"VAULT_DISABLE_REDIRECTS": "dunno",
		}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			common := map[string]string{
				"VAULT_ADDR": decoy.URL, "VAULT_AGENT_ADDR": decoy.URL, "VAULT_TOKEN": "s.DECOYtokenDECOYtoken",
				"VAULT_NAMESPACE": "decoy-ns", "VAULT_WRAP_TTL": "5m", "VAULT_CACERT_BYTES": "not a pem",
				"VAULT_TLS_SERVER_NAME": "decoy.example", "VAULT_HTTP_PROXY": decoy.URL, "VAULT_PROXY_ADDR": decoy.URL,
				"VAULT_HEADERS": `{"X-Decoy":"1"}`, "VAULT_MFA": "decoy:123456", "VAULT_LICENSE": "decoy",
				"VAULT_LICENSE_PATH": "/nonexistent", "VAULT_UNWRAP_TOKEN": "s.DECOYunwrapDECOYunwrap",
				"HTTP_PROXY": decoy.URL, "HTTPS_PROXY": decoy.URL, "ALL_PROXY": decoy.URL, "NO_PROXY": "",
			}
			for k, v := range common {
				t.Setenv(k, v)
			}
			for k, v := range variant.vals {
				t.Setenv(k, v)
			}
			mu.Lock()
			seen = nil
			mu.Unlock()

			ctx := context.Background()
			c, err := bao.New(bao.Config{Addr: front.URL, EnvID: env})
			require.NoError(t, err)
			info, err := c.Login(ctx, secret.New(s.MintGrant(env)))
			require.NoError(t, err)
			_, err = c.LookupSelf(ctx, info.Token)
			require.NoError(t, err)
			_, err = c.RenewSelf(ctx, info.Token)
			require.NoError(t, err)
			vals, err := c.Read(ctx, info.Token, map[string]bao.Ref{"P": {Path: "db", Key: "password"}})
			require.NoError(t, err)
			assert.Equal(t, "pw", vals["P"].Reveal())
			require.NoError(t, c.RevokeSelf(ctx, info.Token))

			assert.Zero(t, decoyHits.Load(), "the decoy was never contacted")
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, seen, 5)
			for i, h := range seen {
				assert.Empty(t, h.Get("X-Vault-Namespace"), "request %d", i)
				assert.Empty(t, h.Get("X-Vault-Wrap-TTL"), "request %d", i)
				assert.Empty(t, h.Get("X-Vault-MFA"), "request %d", i)
				assert.Empty(t, h.Get("X-Decoy"), "request %d", i)
				assert.Equal(t, "true", h.Get("X-Vault-Request"), "request %d", i)
				if i == 0 {
					assert.Empty(t, h.Get("X-Vault-Token"), "login carries no token")
				} else {
					assert.Equal(t, info.Token.Reveal(), h.Get("X-Vault-Token"), "request %d", i)
				}
			}
		})
	}
}

// TestVaultAPINewClientTrap documents why the package does not build an api.Client:
// api.NewClient reads the environment even when given an explicit Config, takes
// VAULT_TOKEN, and fails outright on a malformed VAULT_* variable.
func TestVaultAPINewClientTrap(t *testing.T) {
	s := newFake(t, fakebao.Options{})
	t.Setenv("VAULT_TOKEN", "s.DECOYtokenDECOYtoken")
	c, err := api.NewClient(&api.Config{Address: s.URL(), HttpClient: &http.Client{}})
	require.NoError(t, err)
	assert.Equal(t, "s.DECOYtokenDECOYtoken", c.Token(), "vault/api took VAULT_TOKEN")

	t.Setenv("VAULT_CACERT", "/nonexistent/ca.pem")
	_, err = api.NewClient(&api.Config{Address: s.URL(), HttpClient: &http.Client{}})
	require.Error(t, err, "vault/api fails on a malformed VAULT_CACERT despite the explicit Config")

	_, err = bao.New(bao.Config{Addr: s.URL(), EnvID: env})
	require.NoError(t, err, "bao.New does not care")
}

func TestNamespace(t *testing.T) {
	var got atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("X-Vault-Namespace"))
		w.WriteHeader(http.StatusForbidden)
	}))
	t.Cleanup(hs.Close)
	c, err := bao.New(bao.Config{Addr: hs.URL + "/", EnvID: env, Namespace: "team-a"})
	require.NoError(t, err)
	_, _ = c.LookupSelf(context.Background(), secret.New("s.x"))
	assert.Equal(t, "team-a", got.Load())
}

// TestNewRefusesBadConfig: New refuses, at once, a Config it cannot work with. bao.ca_file
// is read as tenancy.ca_file is, a regular file of bounded size; a fifo is refused at once (os.ReadFile would wait for a writer for
// ever) and a file too large is refused before it is parsed.
func TestNewRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	fifo, big, missing := filepath.Join(dir, "ca.fifo"), filepath.Join(dir, "big.pem"), filepath.Join(dir, "missing.pem")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.WriteFile(big, make([]byte, 4<<20+1), 0o600))
	tests := []struct {
		name   string
		cfg    bao.Config
		detail string
	}{
		{"no addr", bao.Config{EnvID: env}, "bao.addr is required"},
		{"not a URL", bao.Config{Addr: "bao.internal:8200", EnvID: env}, "not an http(s) base URL"},
		{"userinfo", bao.Config{Addr: "https://user:pw-in-url@bao.internal", EnvID: env}, "not an http(s) base URL"},
		{"no env", bao.Config{Addr: "https://bao.internal"}, "env_id"},
		{"bad env", bao.Config{Addr: "https://bao.internal", EnvID: "env-dev-01/../x"}, "env_id"},
		{"mount traversal", bao.Config{Addr: "https://bao.internal", EnvID: env, KVMount: "../sys"}, "bao.kv_mount"},
		{"auth mount", bao.Config{Addr: "https://bao.internal", EnvID: env, AuthMount: "a/../b"}, "bao.auth_mount"},
		{"role with slash", bao.Config{Addr: "https://bao.internal", EnvID: env, Role: "a/b"}, "bao.role"},
		{"missing CA file", bao.Config{Addr: "https://bao.internal", EnvID: env, CAFile: "/nonexistent/ca.pem"}, "bao.ca_file"},
		{"CA file without PEM", bao.Config{Addr: "https://bao.internal", EnvID: env, CAFile: "testdata/kv/ok.json"}, "no PEM certificate"},
		{"CA fifo", bao.Config{Addr: "https://bao.internal", EnvID: env, CAFile: fifo},
			"bao.ca_file: " + fifo + ": cannot read: a fifo, not a regular file"},
		{"CA file too large", bao.Config{Addr: "https://bao.internal", EnvID: env, CAFile: big},
			"bao.ca_file: " + big + ": larger than 4194304 bytes"},
		{"CA file missing", bao.Config{Addr: "https://bao.internal", EnvID: env, CAFile: missing},
			"bao.ca_file: " + missing + ": cannot read: no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := bao.New(tc.cfg)
			assert.Less(t, time.Since(start), 5*time.Second, "refused at once")
			require.Error(t, err)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, bao.ErrConfig)
			assert.Contains(t, err.Error(), tc.detail)
			assert.NotContains(t, err.Error(), "pw-in-url")
		})
	}
}

func TestTLSWithCAFile(t *testing.T) {
	s := newFake(t, fakebao.Options{})
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ErrorLog = log.New(io.Discard, "", 0)
	hs.StartTLS()
	t.Cleanup(hs.Close)
	caFile := t.TempDir() + "/ca.pem"
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw}), 0o600))

	_, err := newClient(t, hs.URL, nil).Login(context.Background(), secret.New(s.MintGrant(env)))
	require.ErrorIs(t, err, bao.ErrUnavailable, "unknown CA without ca_file")

	c, err := bao.New(bao.Config{Addr: hs.URL, EnvID: env, CAFile: caFile})
	require.NoError(t, err)
	_, err = c.Login(context.Background(), secret.New(s.MintGrant(env)))
	require.NoError(t, err)
}

func TestNeedsRenew(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		info bao.TokenInfo
		want bool
	}{
		"fresh":           {bao.TokenInfo{Renewable: true, CreationTTL: time.Hour, ExpireTime: now.Add(time.Hour)}, false},
		"exactly a third": {bao.TokenInfo{Renewable: true, CreationTTL: time.Hour, ExpireTime: now.Add(20 * time.Minute)}, false},
		"below a third":   {bao.TokenInfo{Renewable: true, CreationTTL: time.Hour, ExpireTime: now.Add(20*time.Minute - time.Second)}, true},
		"expired":         {bao.TokenInfo{Renewable: true, CreationTTL: time.Hour, ExpireTime: now.Add(-time.Minute)}, true},
		"not renewable":   {bao.TokenInfo{Renewable: false, CreationTTL: time.Hour, ExpireTime: now.Add(time.Minute)}, false},
		"TTL only":        {bao.TokenInfo{Renewable: true, CreationTTL: time.Hour, TTL: 10 * time.Minute}, true},
		"no creation TTL": {bao.TokenInfo{Renewable: true, TTL: time.Minute}, false},
	} {
		assert.Equal(t, tc.want, tc.info.NeedsRenew(now), name)
	}
}

func TestSecretPath(t *testing.T) {
	tests := []struct {
		mount, env, path string
		want             string
		detail           string
	}{
		{"secret", env, "db", "secret/data/envs/env-dev-01/db", ""},
		{"secret", env, "stripe/api", "secret/data/envs/env-dev-01/stripe/api", ""},
		{"kv/team", "env-prod-03", "a.b/c-d_e", "kv/team/data/envs/env-prod-03/a.b/c-d_e", ""},
		{"secret", env, "", "", "empty"},
		{"secret", env, "..", "", `".." segment`},
		{"secret", env, "../env-dev-02/db", "", `".." segment`},
		{"secret", env, "a/../../env-dev-02/db", "", `".." segment`},
		{"secret", env, "./db", "", `"." segment`},
		{"secret", env, "/db", "", "starts with /"},
		{"secret", env, "db/", "", "empty segment"},
		{"secret", env, "a//b", "", "empty segment"},
		{"secret", env, `a\..\b`, "", "backslash"},
		{"secret", env, "db\x00", "", "control"},
		{"secret", env, "db\n", "", "control"},
		{"secret", env, "%2e%2e/x", "", "% ? #"},
		{"secret", env, "db?version=1", "", "% ? #"},
		{"secret", env, "db#x", "", "% ? #"},
		{"secret", env, "\xff", "", "UTF-8"},
		{"secret", env, " db", "", "space"},
		{"secret", "env-dev-02/../env-dev-01", "db", "", "env_id"},
		{"secret", "", "db", "", "env_id"},
		{"secret", "ENV-DEV-01", "db", "", "env_id"},
		{"", env, "db", "", "mount is empty"},
		{"/secret", env, "db", "", "starts with /"},
		{"secret/..", env, "db", "", `".." segment`},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s|%s|%q", tc.mount, tc.env, tc.path), func(t *testing.T) {
			got, err := bao.SecretPath(tc.mount, tc.env, tc.path)
			if tc.detail == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			require.ErrorIs(t, err, bao.ErrSecretPath)
			assert.Empty(t, got)
			assert.Contains(t, err.Error(), tc.detail)
			assert.Equal(t, codes.SecretPath, codes.Of(err))
		})
	}
}

func TestErrorShape(t *testing.T) {
	cause := errors.New("connection refused")
	e := &bao.Error{Op: "read", Kind: bao.ErrSecretMissing, Var: "DB_PASSWORD", Path: "secret/data/envs/env-dev-01/db",
		Status: 404, Detail: "the secret does not exist", Err: cause}
	assert.Equal(t, "bao read secret/data/envs/env-dev-01/db (variable DB_PASSWORD): SECRET_MISSING: the secret does not exist (HTTP 404): connection refused", e.Error())
	assert.ErrorIs(t, e, bao.ErrSecretMissing)
	assert.ErrorIs(t, e, cause)
	assert.NotErrorIs(t, e, bao.ErrSecretDenied)
	wrapped := fmt.Errorf("tick: %w", e)
	assert.Equal(t, codes.SecretMissing, codes.Of(wrapped))
	for _, k := range []struct {
		err  error
		code codes.Code
	}{
		{bao.ErrUnauthenticated, codes.Unauthenticated}, {bao.ErrSecretDenied, codes.SecretDenied},
		{bao.ErrSecretMissing, codes.SecretMissing}, {bao.ErrLeaseShape, codes.LeaseShape},
		{bao.ErrSecretPath, codes.SecretPath}, {bao.ErrUnavailable, codes.Unavailable}, {bao.ErrConfig, codes.Config},
	} {
		assert.Equal(t, k.code, codes.Of(k.err), "a bare sentinel has a Code method too")
		assert.Equal(t, k.code, (&bao.Error{Kind: k.err}).Code())
	}
	assert.False(t, strings.Contains((&bao.Error{Op: "login", Kind: bao.ErrUnauthenticated}).Error(), "<nil>"))
	// No Kind nor Detail: no empty part and no double space (was "UNAVAILABLE:  (HTTP 503): …", "UNAVAILABLE: : …").
	assert.Equal(t, "bao read: UNAVAILABLE: (HTTP 503): connection refused", (&bao.Error{Op: "read", Status: 503, Err: cause}).Error())
	assert.Equal(t, "bao read: UNAVAILABLE: connection refused", (&bao.Error{Op: "read", Err: cause}).Error())
	assert.Equal(t, "bao p/x: SECRET_MISSING: secret is missing", (&bao.Error{Kind: bao.ErrSecretMissing, Path: "p/x"}).Error(), "no Op: one space")
}

// countingTransport is a RoundTripper that is not an *http.Transport.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return (&http.Transport{}).RoundTrip(r)
}

func TestHTTPClientOption(t *testing.T) {
	s := newFake(t, fakebao.Options{})
	rt := &countingTransport{}
	base := &http.Client{Transport: rt}
	c, err := bao.New(bao.Config{Addr: s.URL(), EnvID: env, HTTPClient: base})
	require.NoError(t, err)
	_, err = c.Login(context.Background(), secret.New(s.MintGrant(env)))
	require.NoError(t, err)
	assert.Equal(t, int32(1), rt.n.Load(), "the given transport carried the request")
	assert.Nil(t, base.CheckRedirect, "the caller's client is not modified")

	_, err = bao.New(bao.Config{Addr: s.URL(), EnvID: env, HTTPClient: base, CAFile: "testdata/kv/ok.json"})
	require.ErrorIs(t, err, bao.ErrConfig)
}

// TestLogsHoldNoSecret plants a grant, a token and secret values and runs every call,
// good and failing, with a debug logger: no record holds any of them.
func TestLogsHoldNoSecret(t *testing.T) {
	ctx := context.Background()
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := newFake(t, fakebao.Options{Logger: logger})
	s.PutSecret(env, "db", map[string]string{"password": "pw-planted-in-logs"})
	c, err := bao.New(bao.Config{Addr: s.URL(), EnvID: env, Logger: logger})
	require.NoError(t, err)
	grant := s.MintGrant(env)
	info, err := c.Login(ctx, secret.New(grant))
	require.NoError(t, err)
	_, err = c.LookupSelf(ctx, info.Token)
	require.NoError(t, err)
	_, err = c.RenewSelf(ctx, info.Token)
	require.NoError(t, err)
	_, err = c.Read(ctx, info.Token, map[string]bao.Ref{"P": {Path: "db", Key: "password"}, "Q": {Path: "db", Key: "nokey"}})
	require.ErrorIs(t, err, bao.ErrSecretMissing)
	require.NoError(t, c.RevokeSelf(ctx, info.Token))
	_, err = c.Login(ctx, secret.New(grant+"x"))
	require.Error(t, err)

	mu.Lock()
	out := buf.String()
	mu.Unlock()
	assert.Contains(t, out, "openbao request", "the logger was used")
	assert.Contains(t, out, "fakebao request", "the fake's logger was used")
	for _, v := range []string{grant, info.Token.Reveal(), "pw-planted-in-logs"} {
		assert.NotContains(t, out, v)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
