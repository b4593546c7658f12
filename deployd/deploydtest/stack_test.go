package deploydtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fakes/admin"
)

func TestStackConformance(t *testing.T) {
	s := deploydtest.NewStack(t, nil)
	deploydtest.Conformance(t, deploydtest.StackTarget(s, "env-dev-01", "env-dev-02"))
}

// TestStackTick plays the tenancy and OpenBao half of a tick through the stack with
// the real tenancy client: check-in, download, lease, login with the lease's grant,
// KV read, report.
func TestStackTick(t *testing.T) {
	const env = "env-dev-01"
	s := deploydtest.NewStack(t, nil)
	token, err := s.Login(t.Context(), env)
	require.NoError(t, err)
	b := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: env, Serial: 1,
		Secrets: map[string]faketenancy.SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}}})
	sha, serial, err := s.Tenancy.PublishBundle(env, b.Data)
	require.NoError(t, err)
	require.Equal(t, b.SHA, sha)
	s.Bao.PutSecret(env, "db", map[string]string{"password": "s3cret-planted-value"})

	c, err := tenancy.New(tenancy.Config{BaseURL: s.Tenancy.URL(), HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil }})
	require.NoError(t, err)
	ctx := t.Context()
	ins, err := c.Checkin(ctx, tenancy.Checkin{EnvID: env})
	require.NoError(t, err)
	require.Equal(t, tenancy.Instruction{Action: tenancy.ActionApply, SHA: sha, Serial: serial, NextCheckin: time.Minute}, ins)
	var buf bytes.Buffer
	_, err = c.Bundle(ctx, sha, &buf)
	require.NoError(t, err)
	assert.Equal(t, b.Data, buf.Bytes())

	lease, err := c.Lease(ctx, env, sha)
	require.NoError(t, err)
	newToken, err := admin.Login(ctx, http.DefaultClient, s.Bao.URL(), lease.Grant.Reveal())
	require.NoError(t, err)
	status, data := readKV(t, s.Bao.URL(), newToken, "secret/data/envs/"+env+"/db")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "s3cret-planted-value", data["password"])
	status, _ = readKV(t, s.Bao.URL(), newToken, "secret/data/envs/env-dev-02/db")
	assert.Equal(t, http.StatusForbidden, status, "env pinning")

	token = newToken // the new token is the bearer from now on
	require.NoError(t, c.Report(ctx, tenancy.Report{EnvID: env, SHA: sha, Serial: serial, Result: tenancy.ResultApplied}))
	r, err := s.Tenancy.WaitReport(ctx, env, 1)
	require.NoError(t, err)
	assert.Equal(t, "applied", r.Result)
	assert.Len(t, s.Tenancy.Leases(env), 1)
	assert.Len(t, s.Tenancy.Checkins(env), 1)
	assert.NotEmpty(t, s.Bao.Requests())
	for _, q := range s.Tenancy.Requests() {
		assert.Equal(t, env, q.EnvID)
	}

	t.Run("superseded_grant", func(t *testing.T) {
		old := s.Bao.MintGrant(env)
		_ = s.Bao.MintGrant(env)
		_, err := admin.Login(t.Context(), http.DefaultClient, s.Bao.URL(), old)
		assert.ErrorContains(t, err, "HTTP 400")
	})
}

func TestStackAdminHandler(t *testing.T) {
	s := deploydtest.NewStack(t, &fakestack.Options{LeaseBudget: 1})
	srv := httptest.NewServer(s.AdminHandler())
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/envs/env-dev-01/desired", strings.NewReader(`{"action":"down","purge":true}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	tok, err := s.Login(t.Context(), "env-dev-01")
	require.NoError(t, err)
	c, err := tenancy.New(tenancy.Config{BaseURL: s.Tenancy.URL(), HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(tok), nil }})
	require.NoError(t, err)
	ins, err := c.Checkin(t.Context(), tenancy.Checkin{EnvID: "env-dev-01"})
	require.NoError(t, err)
	assert.Equal(t, tenancy.ActionDown, ins.Action)
	assert.True(t, ins.Purge)
}

// TestStackDocker: with Options.Docker the stack installs the fake docker too, and
// Start refuses a bad docker option without leaving the other fakes running.
func TestStackDocker(t *testing.T) {
	assert.Nil(t, deploydtest.NewStack(t, nil).Docker, "no docker unless asked for")
	s := deploydtest.NewStack(t, &fakestack.Options{Docker: &fakedocker.Options{Script: &fakedocker.Script{ServerVersion: "20.10.24"}}})
	require.NotNil(t, s.Docker)
	version := exec.CommandContext(t.Context(), s.Docker.Path, "version", "--format", "{{.Server.Version}}")
	version.Env = s.Docker.Env()
	out, err := version.Output()
	require.NoError(t, err)
	assert.Equal(t, "20.10.24\n", string(out))

	_, err = fakestack.Start(t.Context(), fakestack.Options{Docker: &fakedocker.Options{Script: &fakedocker.Script{PSFormat: "table"}}})
	assert.ErrorContains(t, err, `PSFormat "table"`)
}

func TestMakeBundle(t *testing.T) {
	a := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"})
	b := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"})
	assert.Equal(t, a.Data, b.Data, "the same spec gives the same bytes")
	gz := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01", Gzip: true})
	assert.Equal(t, a.SHA, gz.SHA)
	assert.Equal(t, []byte{0x1f, 0x8b}, gz.Data[:2])
	other := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01", Serial: 2})
	assert.NotEqual(t, a.SHA, other.SHA, "the manifest is part of the sha")
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.Manifest, &m))
	assert.Equal(t, []any{"compose.yaml"}, m["files"])
	assert.Equal(t, float64(1), m["schema"])
}

// readKV reads the KV v2 secret at path with token: the status and, with 200, the
// secret's data.
func readKV(t *testing.T, addr, token, path string) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, addr+"/v1/"+path, nil)
	require.NoError(t, err)
	req.Header.Set("X-Vault-Token", token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Data map[string]string `json:"data"`
		} `json:"data"`
	}
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp.StatusCode, out.Data.Data
}
