package fakebao_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
)

// cleanVaultEnv clears what vault/api reads so that the real client talks only to
// the address the test gives it.
func cleanVaultEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"VAULT_ADDR", "VAULT_AGENT_ADDR", "VAULT_TOKEN", "VAULT_NAMESPACE",
		"VAULT_WRAP_TTL", "VAULT_CACERT", "VAULT_CAPATH", "VAULT_HEADERS", "VAULT_MAX_RETRIES",
		"VAULT_RATE_LIMIT", "VAULT_SKIP_VERIFY", "VAULT_CLIENT_CERT", "VAULT_CLIENT_KEY",
		"VAULT_CLIENT_TIMEOUT", "VAULT_SRV_LOOKUP", "VAULT_HTTP_PROXY", "VAULT_PROXY_ADDR"} {
		t.Setenv(k, "")
	}
}

// vaultClient is the real vault/api client pointed at s, with token (may be "").
func vaultClient(t *testing.T, s *fakebao.Server, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: s.URL(), HttpClient: &http.Client{}, MaxRetries: 0})
	require.NoError(t, err)
	c.ClearToken()
	if token != "" {
		c.SetToken(token)
	}
	return c
}

func newServer(t *testing.T, opts fakebao.Options) (*fakebao.Server, *deploydtest.Clock) {
	t.Helper()
	cleanVaultEnv(t)
	clk := deploydtest.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	s := fakebao.New(opts)
	t.Cleanup(s.Close)
	return s, clk
}

func login(t *testing.T, s *fakebao.Server, env string) *api.Secret {
	t.Helper()
	sec, err := vaultClient(t, s, "").Logical().Write("auth/jwt-tenancy/login",
		map[string]any{"role": "see-env", "jwt": s.MintGrant(env)})
	require.NoError(t, err)
	require.NotNil(t, sec)
	require.NotNil(t, sec.Auth)
	return sec
}

// raw sends one request without vault/api and returns the status and decoded body.
func raw(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	status, b := call(t, method, url, token, body)
	var m map[string]any
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &m), "body %s", b)
	}
	return status, m
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func TestLoginShapeOfRecord(t *testing.T) {
	s, _ := newServer(t, fakebao.Options{})
	status, body := raw(t, http.MethodPost, s.URL()+"/v1/auth/jwt-tenancy/login", "",
		`{"role":"see-env","jwt":"`+s.MintGrant("env-dev-01")+`"}`)
	require.Equal(t, http.StatusOK, status)
	// The key sets and kinds (data, wrap_info and warnings null) are TestShapesOfRecord's.
	assert.Equal(t, "", body["lease_id"])
	auth := body["auth"].(map[string]any)
	assert.Equal(t, []any{"default", "see-env"}, auth["policies"])
	assert.Equal(t, map[string]any{"role": "see-env", "env_id": "env-dev-01"}, auth["metadata"])
	assert.InDelta(t, 3600, auth["lease_duration"], 0)
	assert.Equal(t, true, auth["renewable"])
	assert.Equal(t, "service", auth["token_type"])
	assert.InDelta(t, 0, auth["num_uses"], 0)

	// The same through vault/api.
	sec := login(t, s, "env-dev-02")
	assert.NotEmpty(t, sec.Auth.ClientToken)
	assert.Equal(t, 3600, sec.Auth.LeaseDuration)
	assert.True(t, sec.Auth.Renewable)
	assert.Equal(t, "env-dev-02", sec.Auth.Metadata["env_id"])
	env, ok := s.TokenEnv(sec.Auth.ClientToken)
	assert.True(t, ok)
	assert.Equal(t, "env-dev-02", env)
}

func TestLoginRejections(t *testing.T) {
	s, clk := newServer(t, fakebao.Options{})
	superseded := s.MintGrant("env-dev-01")
	current := s.MintGrant("env-dev-01")
	other := fakebao.New(fakebao.Options{})
	t.Cleanup(other.Close)
	foreign := other.MintGrant("env-dev-01")
	parts := strings.Split(current, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	tests := []struct {
		name, body, want string
		before           func()
	}{
		{"wrong role", `{"role":"admin","jwt":"` + current + `"}`, `role "admin" could not be found`, nil},
		{"missing role", `{"jwt":"` + current + `"}`, "missing role", nil},
		{"missing jwt", `{"role":"see-env"}`, "missing token", nil},
		{"garbage jwt", `{"role":"see-env","jwt":"garbage"}`, "error validating token", nil},
		{"foreign signature", `{"role":"see-env","jwt":"` + foreign + `"}`, "signature", nil},
		{"tampered claims", `{"role":"see-env","jwt":"` + tampered + `"}`, "error validating token", nil},
		{"superseded", `{"role":"see-env","jwt":"` + superseded + `"}`, "superseded", nil},
		{"not json", `{"role":`, "failed to parse JSON", nil},
		{"expired", `{"role":"see-env","jwt":"` + current + `"}`, "expired", func() { clk.Advance(fakebao.GrantTTL + time.Second) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			status, body := raw(t, http.MethodPost, s.URL()+"/v1/auth/jwt-tenancy/login", "", tc.body)
			require.Equal(t, http.StatusBadRequest, status)
			errs := body["errors"].([]any)
			require.Len(t, errs, 1)
			assert.Contains(t, errs[0], tc.want)
		})
	}
	t.Run("vault/api sees a 400 ResponseError", func(t *testing.T) {
		_, err := vaultClient(t, s, "").Logical().Write("auth/jwt-tenancy/login",
			map[string]any{"role": "see-env", "jwt": superseded})
		var re *api.ResponseError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, http.StatusBadRequest, re.StatusCode)
	})
	t.Run("the current grant of another env is unaffected", func(t *testing.T) {
		g := s.MintGrant("env-dev-02")
		s.MintGrant("env-dev-03")
		status, _ := raw(t, http.MethodPost, s.URL()+"/v1/auth/jwt-tenancy/login", "",
			`{"role":"see-env","jwt":"`+g+`"}`)
		assert.Equal(t, http.StatusOK, status)
	})
}

func TestMintGrantClaims(t *testing.T) {
	s, clk := newServer(t, fakebao.Options{})
	g := s.MintGrant("env-prod-03")
	parts := strings.Split(g, ".")
	require.Len(t, parts, 3)
	claimsJSON, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(claimsJSON, &c))
	assert.Equal(t, []string{"aud", "env_id", "exp", "iat", "jti", "sub"}, keys(c))
	assert.Equal(t, "env-prod-03", c["env_id"])
	assert.Equal(t, fakebao.GrantAudience, c["aud"])
	assert.InDelta(t, clk.Now().Unix(), c["iat"], 0)
	assert.InDelta(t, clk.Now().Add(fakebao.GrantTTL).Unix(), c["exp"], 0)
	assert.NotEqual(t, g, s.MintGrant("env-prod-03"), "every grant is new")
}

func TestLookupRenewRevoke(t *testing.T) {
	s, clk := newServer(t, fakebao.Options{})
	tok := login(t, s, "env-dev-01").Auth.ClientToken
	c := vaultClient(t, s, tok)

	status, body := raw(t, http.MethodGet, s.URL()+"/v1/auth/token/lookup-self", tok, "")
	require.Equal(t, http.StatusOK, status)
	data := body["data"].(map[string]any)
	for _, k := range []string{"ttl", "creation_ttl", "expire_time", "renewable", "meta", "policies", "num_uses", "accessor"} {
		assert.Contains(t, data, k)
	}
	assert.Equal(t, clk.Now().Add(time.Hour).Format(time.RFC3339Nano), data["expire_time"])

	clk.Advance(45 * time.Minute)
	sec, err := c.Auth().Token().LookupSelf()
	require.NoError(t, err)
	ttl, err := sec.TokenTTL()
	require.NoError(t, err)
	assert.Equal(t, 15*time.Minute, ttl)
	renewable, err := sec.TokenIsRenewable()
	require.NoError(t, err)
	assert.True(t, renewable)
	meta, err := sec.TokenMetadata()
	require.NoError(t, err)
	assert.Equal(t, "env-dev-01", meta["env_id"])
	assert.Equal(t, json.Number("3600"), sec.Data["creation_ttl"])

	s.SetTokenTTL(2 * time.Hour)
	ren, err := c.Auth().Token().RenewSelf(0)
	require.NoError(t, err)
	require.NotNil(t, ren.Auth)
	assert.Equal(t, 7200, ren.Auth.LeaseDuration)
	sec, err = c.Auth().Token().LookupSelf()
	require.NoError(t, err)
	ttl, _ = sec.TokenTTL()
	assert.Equal(t, 2*time.Hour, ttl)

	status, _ = raw(t, http.MethodPost, s.URL()+"/v1/auth/token/revoke-self", tok, "")
	assert.Equal(t, http.StatusNoContent, status)
	_, err = c.Auth().Token().LookupSelf()
	var re *api.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusForbidden, re.StatusCode)
	assert.Equal(t, []string{"permission denied"}, re.Errors)
	_, ok := s.TokenEnv(tok)
	assert.False(t, ok)
}

func TestTokenExpiryAndInvalidation(t *testing.T) {
	s, clk := newServer(t, fakebao.Options{TokenTTL: 10 * time.Minute})
	a := login(t, s, "env-dev-01").Auth.ClientToken
	b := login(t, s, "env-dev-02").Auth.ClientToken

	tests := []struct {
		name  string
		tok   string
		check func()
		live  bool
	}{
		{"fresh token", a, func() {}, true},
		{"other env invalidated", a, func() { s.InvalidateTokens("env-dev-02") }, true},
		{"invalidated", b, func() {}, false},
		{"one second before expiry", a, func() { clk.Advance(10*time.Minute - time.Second) }, true},
		{"at expiry", a, func() { clk.Advance(time.Second) }, false},
		{"garbage", "s.nothing", func() {}, false},
		{"empty", "", func() {}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check()
			_, ok := s.TokenEnv(tc.tok)
			assert.Equal(t, tc.live, ok)
			status, body := raw(t, http.MethodGet, s.URL()+"/v1/auth/token/lookup-self", tc.tok, "")
			if tc.live {
				assert.Equal(t, http.StatusOK, status)
				return
			}
			assert.Equal(t, http.StatusForbidden, status)
			assert.Equal(t, []any{"permission denied"}, body["errors"])
		})
	}
}

func TestNotRenewable(t *testing.T) {
	s, _ := newServer(t, fakebao.Options{NotRenewable: true})
	sec := login(t, s, "env-dev-01")
	assert.False(t, sec.Auth.Renewable)
	_, err := vaultClient(t, s, sec.Auth.ClientToken).Auth().Token().RenewSelf(0)
	var re *api.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusBadRequest, re.StatusCode)
}

func TestKVThroughVaultAPI(t *testing.T) {
	s, _ := newServer(t, fakebao.Options{})
	ctx := context.Background()
	admin := vaultClient(t, s, s.RootToken()).KVv2("secret")
	v, err := admin.Put(ctx, "envs/env-dev-01/db", map[string]any{"password": "pw-1", "user": "app"})
	require.NoError(t, err)
	assert.Equal(t, 1, v.VersionMetadata.Version)
	assert.Equal(t, 2, s.PutSecret("env-dev-01", "db", map[string]string{"password": "pw-2", "user": "app"}))
	s.PutSecret("env-dev-02", "db", map[string]string{"password": "other"})

	tok := login(t, s, "env-dev-01").Auth.ClientToken
	kv := vaultClient(t, s, tok).KVv2("secret")

	got, err := kv.Get(ctx, "envs/env-dev-01/db")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"password": "pw-2", "user": "app"}, got.Data)
	assert.Equal(t, 2, got.VersionMetadata.Version)

	t.Run("another env is 403 with the policy's multierror", func(t *testing.T) {
		_, err := kv.Get(ctx, "envs/env-dev-02/db")
		var re *api.ResponseError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, http.StatusForbidden, re.StatusCode)
		assert.Equal(t, []string{"1 error occurred:\n\t* permission denied\n\n"}, re.Errors)
	})
	t.Run("missing is 404 errors []", func(t *testing.T) {
		_, err := kv.Get(ctx, "envs/env-dev-01/nope")
		require.ErrorIs(t, err, api.ErrSecretNotFound)
		status, body := raw(t, http.MethodGet, s.URL()+"/v1/secret/data/envs/env-dev-01/nope", tok, "")
		assert.Equal(t, http.StatusNotFound, status)
		assert.Equal(t, map[string]any{"errors": []any{}}, body)
	})
	t.Run("traversal is denied", func(t *testing.T) {
		for _, p := range []string{"envs/env-dev-01/../env-dev-02/db", "envs/env-dev-01//db", "envs/env-dev-01/./db", "envs/env-dev-01"} {
			status, _ := raw(t, http.MethodGet, s.URL()+"/v1/secret/data/"+p, tok, "")
			assert.Equal(t, http.StatusForbidden, status, p)
		}
	})
	t.Run("a service token cannot write", func(t *testing.T) {
		_, err := kv.Put(ctx, "envs/env-dev-01/db", map[string]any{"password": "x"})
		var re *api.ResponseError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, http.StatusForbidden, re.StatusCode)
	})
	t.Run("an invalid token is 403 permission denied", func(t *testing.T) {
		status, body := raw(t, http.MethodGet, s.URL()+"/v1/secret/data/envs/env-dev-01/db", "s.bogus", "")
		assert.Equal(t, http.StatusForbidden, status)
		assert.Equal(t, []any{"permission denied"}, body["errors"])
	})
	t.Run("deleted: vault/api returns no error and nil data", func(t *testing.T) {
		require.NoError(t, admin.Delete(ctx, "envs/env-dev-01/db"))
		got, err := kv.Get(ctx, "envs/env-dev-01/db")
		require.NoError(t, err, "the VAULT_* trap (docs/PROTOCOL.md)")
		assert.Nil(t, got.Data)
		assert.False(t, got.VersionMetadata.DeletionTime.IsZero())
		status, body := raw(t, http.MethodGet, s.URL()+"/v1/secret/data/envs/env-dev-01/db", tok, "")
		assert.Equal(t, http.StatusNotFound, status)
		data := body["data"].(map[string]any)
		assert.Nil(t, data["data"])
		assert.NotEmpty(t, data["metadata"].(map[string]any)["deletion_time"])
	})
	// DestroySecret and DeleteSecret: no data (destroyed, or a deletion time), until
	// a new version is put.
	for _, tc := range []struct {
		name   string
		remove func(env, path string)
		gone   func(*api.KVVersionMetadata) bool
	}{
		{"DestroySecret", s.DestroySecret, func(m *api.KVVersionMetadata) bool { return m.Destroyed }},
		{"DeleteSecret", s.DeleteSecret, func(m *api.KVVersionMetadata) bool { return !m.DeletionTime.IsZero() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.PutSecret("env-dev-01", tc.name, map[string]string{"key": "k"})
			tc.remove("env-dev-01", tc.name)
			got, err := kv.Get(ctx, "envs/env-dev-01/"+tc.name)
			require.NoError(t, err)
			assert.Nil(t, got.Data)
			assert.True(t, tc.gone(got.VersionMetadata))
			s.PutSecret("env-dev-01", tc.name, map[string]string{"key": "k2"})
			got, err = kv.Get(ctx, "envs/env-dev-01/"+tc.name)
			require.NoError(t, err)
			assert.Equal(t, "k2", got.Data["key"])
		})
	}
}

func TestSealed(t *testing.T) {
	s, _ := newServer(t, fakebao.Options{})
	tok := login(t, s, "env-dev-01").Auth.ClientToken
	grant := s.MintGrant("env-dev-01")
	s.SetSealed(true)
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/auth/jwt-tenancy/login", `{"role":"see-env","jwt":"` + grant + `"}`},
		{http.MethodGet, "/v1/auth/token/lookup-self", ""},
		{http.MethodPost, "/v1/auth/token/renew-self", ""},
		{http.MethodGet, "/v1/secret/data/envs/env-dev-01/db", ""},
		{http.MethodGet, "/v1/sys/health", ""},
	} {
		t.Run(r.path, func(t *testing.T) {
			status, body := raw(t, r.method, s.URL()+r.path, tok, r.body)
			assert.Equal(t, http.StatusServiceUnavailable, status)
			assert.Equal(t, map[string]any{"errors": []any{"Vault is sealed"}}, body)
		})
	}
	_, err := vaultClient(t, s, tok).Auth().Token().LookupSelf()
	var re *api.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
	s.SetSealed(false)
	status, _ := raw(t, http.MethodGet, s.URL()+"/v1/auth/token/lookup-self", tok, "")
	assert.Equal(t, http.StatusOK, status)
}

func TestLoginFaults(t *testing.T) {
	tests := []struct {
		fault string
		check func(t *testing.T, body map[string]any)
	}{
		{fakebao.FaultWrapped, func(t *testing.T, body map[string]any) {
			assert.Nil(t, body["auth"])
			wi := body["wrap_info"].(map[string]any)
			assert.NotEmpty(t, wi["token"])
			assert.Equal(t, "auth/jwt-tenancy/login", wi["creation_path"])
		}},
		{fakebao.FaultAppRole, func(t *testing.T, body map[string]any) {
			auth := body["auth"].(map[string]any)
			assert.Contains(t, auth["metadata"], "role_name")
			assert.Contains(t, body["data"], "role_id")
		}},
		{fakebao.FaultNoToken, func(t *testing.T, body map[string]any) {
			assert.Equal(t, "", body["auth"].(map[string]any)["client_token"])
		}},
		{fakebao.FaultLimitedUse, func(t *testing.T, body map[string]any) {
			assert.InDelta(t, 3, body["auth"].(map[string]any)["num_uses"], 0)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.fault, func(t *testing.T) {
			s, _ := newServer(t, fakebao.Options{})
			s.SetLoginFault(tc.fault)
			status, body := raw(t, http.MethodPost, s.URL()+"/v1/auth/jwt-tenancy/login", "",
				`{"role":"see-env","jwt":"`+s.MintGrant("env-dev-01")+`"}`)
			require.Equal(t, http.StatusOK, status)
			tc.check(t, body)
			s.SetLoginFault(fakebao.FaultNone)
			status, body = raw(t, http.MethodPost, s.URL()+"/v1/auth/jwt-tenancy/login", "",
				`{"role":"see-env","jwt":"`+s.MintGrant("env-dev-01")+`"}`)
			require.Equal(t, http.StatusOK, status)
			assert.NotEmpty(t, body["auth"].(map[string]any)["client_token"])
		})
	}
	t.Run("unknown fault panics", func(t *testing.T) {
		s, _ := newServer(t, fakebao.Options{})
		assert.Panics(t, func() { s.SetLoginFault("nonsense") })
	})
}

func TestRequestsNeverHoldAToken(t *testing.T) {
	s, _ := newServer(t, fakebao.Options{})
	grant := s.MintGrant("env-dev-01")
	tok := login(t, s, "env-dev-01").Auth.ClientToken
	raw(t, http.MethodGet, s.URL()+"/v1/auth/token/lookup-self?token="+tok, tok, "")
	raw(t, http.MethodGet, s.URL()+"/v1/secret/data/envs/env-dev-02/db", tok, "")
	reqs := s.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, fakebao.Request{Method: http.MethodPut, Path: "/v1/auth/jwt-tenancy/login", Status: 200, Time: reqs[0].Time}, reqs[0])
	assert.Equal(t, http.StatusForbidden, reqs[2].Status)
	for _, r := range reqs {
		blob, _ := json.Marshal(r)
		assert.NotContains(t, string(blob), tok)
		assert.NotContains(t, string(blob), grant)
	}
}

func TestHandlerOnAnotherListener(t *testing.T) {
	s, _ := newServer(t, fakebao.Options{AuthMount: "jwt-other", Role: "reader", KVMount: "kv"})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	status, body := raw(t, http.MethodPost, hs.URL+"/v1/auth/jwt-other/login", "",
		`{"role":"reader","jwt":"`+s.MintGrant("env-dev-01")+`"}`)
	require.Equal(t, http.StatusOK, status)
	tok := body["auth"].(map[string]any)["client_token"].(string)
	s.PutSecret("env-dev-01", "db", map[string]string{"k": "v"})
	status, body = raw(t, http.MethodGet, hs.URL+"/v1/kv/data/envs/env-dev-01/db", tok, "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, map[string]any{"k": "v"}, body["data"].(map[string]any)["data"])
	status, _ = raw(t, http.MethodPost, hs.URL+"/v1/auth/jwt-tenancy/login", "", `{}`)
	assert.Equal(t, http.StatusForbidden, status, "the default mount is not served: an unknown path needs a token, as on OpenBao")
}

func TestConcurrentLogins(t *testing.T) {
	s, _ := newServer(t, fakebao.Options{})
	envs := []string{"env-dev-01", "env-dev-02", "env-dev-03", "env-dev-04"}
	var wg sync.WaitGroup
	errs := make(chan error, len(envs)*5)
	for _, env := range envs {
		for range 5 {
			wg.Go(func() {
				c, err := api.NewClient(&api.Config{Address: s.URL(), HttpClient: &http.Client{}})
				if err != nil {
					errs <- err
					return
				}
				c.ClearToken()
				sec, err := c.Logical().Write("auth/jwt-tenancy/login", map[string]any{"role": "see-env", "jwt": s.MintGrant(env)})
				if err != nil {
					var re *api.ResponseError
					if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
						return // superseded by a concurrent mint: expected
					}
					errs <- err
					return
				}
				if got, ok := s.TokenEnv(sec.Auth.ClientToken); !ok || got != env {
					errs <- errors.New("token of the wrong env")
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
