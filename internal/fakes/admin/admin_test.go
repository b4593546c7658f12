package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/admin"
)

func setup(t *testing.T) (*httptest.Server, *faketenancy.Server, *fakebao.Server) {
	t.Helper()
	bao := fakebao.New(fakebao.Options{})
	t.Cleanup(bao.Close)
	ten := faketenancy.New(faketenancy.Options{Authority: bao})
	t.Cleanup(ten.Close)
	srv := httptest.NewServer(admin.New(ten, bao, nil))
	t.Cleanup(srv.Close)
	return srv, ten, bao
}

func do(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(data) > 0 {
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, string(data)
}

func TestRefusals(t *testing.T) {
	srv, _, _ := setup(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"desired_bad_action", "PUT", "/envs/env-dev-01/desired", `{"action":"up"}`, 400, "action must be apply, none or down"},
		{"desired_unknown_field", "PUT", "/envs/env-dev-01/desired", `{"action":"none","desired_sha":"x"}`, 400, "desired_sha"},
		{"bundle_not_tar", "POST", "/envs/env-dev-01/bundles", `hello`, 400, "env-dev-01"},
		{"secret_not_strings", "PUT", "/envs/env-dev-01/secrets/db", `{"password":1}`, 400, "JSON"},
		{"faults_bad_shape", "PUT", "/faults", `{"lease_shape":"kerberos"}`, 400, "lease_shape"},
		{"faults_bad_call", "PUT", "/faults", `{"status":{"register":500}}`, 400, "unknown call"},
		{"faults_bad_status", "PUT", "/faults", `{"status":{"lease":42}}`, 400, "not an HTTP status"},
		{"faults_bad_login", "PUT", "/faults", `{"login_fault":"kerberos"}`, 400, "login_fault"},
		{"faults_negative", "PUT", "/faults", `{"lease_budget":-1}`, 400, "negative"},
		{"wait_bad_n", "GET", "/envs/env-dev-01/reports/0", ``, 400, "n must be"},
		{"wait_bad_timeout", "GET", "/envs/env-dev-01/reports/1?timeout=soon", ``, 400, "timeout"},
		{"wait_times_out", "GET", "/envs/env-dev-01/reports/1?timeout=50ms", ``, 504, "waiting for report 1 of env-dev-01"},
		{"unknown_route", "GET", "/envs", ``, 404, "no admin call GET /envs"},
		{"wrong_method", "DELETE", "/faults", ``, 404, "no admin call DELETE /faults"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do(t, srv, tt.method, tt.path, tt.body)
			assert.Equal(t, tt.status, status, body)
			assert.Contains(t, body, tt.want)
		})
	}
}

func TestFaultsRoundTrip(t *testing.T) {
	srv, ten, _ := setup(t)
	in := `{"lease_shape":"approle","lease_budget":2,"status":{"checkin":503},"retry_after_s":30,"delay_ms":{"bundle":250},"echo_bearer":true,"truncate_bundle":true,"sealed":true,"login_fault":"wrapped","token_ttl_s":60}`
	status, body := do(t, srv, "PUT", "/faults", in)
	require.Equal(t, 204, status, body)
	status, body = do(t, srv, "GET", "/faults", "")
	require.Equal(t, 200, status)
	assert.JSONEq(t, in, body)
	f := ten.Faults()
	assert.Equal(t, "approle", f.LeaseShape)
	assert.Equal(t, 503, f.Status["checkin"])
	status, _ = do(t, srv, "PUT", "/faults", `{}`)
	require.Equal(t, 204, status)
	status, body = do(t, srv, "GET", "/faults", "")
	require.Equal(t, 200, status)
	assert.JSONEq(t, `{"lease_shape":"","lease_budget":0,"status":null,"retry_after_s":0,"delay_ms":null,"echo_bearer":false,"truncate_bundle":false,"sealed":false,"login_fault":"","token_ttl_s":0}`, body)
}

func TestTokensAndSecrets(t *testing.T) {
	srv, _, bao := setup(t)
	status, body := do(t, srv, "POST", "/envs/env-dev-01/tokens", "")
	require.Equal(t, 200, status, body)
	var out struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	env, ok := bao.TokenEnv(out.Token)
	require.True(t, ok)
	assert.Equal(t, "env-dev-01", env)

	status, _ = do(t, srv, "DELETE", "/envs/env-dev-01/tokens", "")
	require.Equal(t, 204, status)
	_, ok = bao.TokenEnv(out.Token)
	assert.False(t, ok, "tokens of the env are revoked")

	status, body = do(t, srv, "PUT", "/envs/env-dev-01/secrets/app/api", `{"key":"v1"}`)
	require.Equal(t, 200, status)
	assert.JSONEq(t, `{"version":1}`, body)
	status, body = do(t, srv, "PUT", "/envs/env-dev-01/secrets/app/api", `{"key":"v2"}`)
	require.Equal(t, 200, status)
	assert.JSONEq(t, `{"version":2}`, body)
	status, _ = do(t, srv, "DELETE", "/envs/env-dev-01/secrets/app/api", "")
	assert.Equal(t, 204, status)
	status, _ = do(t, srv, "DELETE", "/envs/env-dev-01/secrets/app/api?destroy=true", "")
	assert.Equal(t, 204, status)

	for _, path := range []string{"/envs/env-dev-01/reports", "/envs/env-dev-01/checkins", "/envs/env-dev-01/leases"} {
		status, body = do(t, srv, "GET", path, "")
		assert.Equal(t, 200, status)
		assert.JSONEq(t, `[]`, body, "an empty list is [], never null")
	}
}

func TestLive(t *testing.T) {
	srv, ten, _ := setup(t)
	for _, object := range []string{"live", "condition", "deferred"} {
		status, body := do(t, srv, "GET", "/envs/env-dev-01/"+object, "")
		assert.Equal(t, 404, status)
		assert.Contains(t, body, "the latest check-in of env-dev-01 carries no "+object+" object")
	}

	status, body := do(t, srv, "POST", "/envs/env-dev-01/tokens", "")
	require.Equal(t, 200, status, body)
	var out struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	checkin := func(live string) {
		t.Helper()
		b := `{"env_id":"env-dev-01","agent_version":"0.1.0","current_sha":"","current_serial":0,"last_result":"","last_code":"",` +
			`"host":{"hostname":"h","docker_version":"27","free_mb":1}` + live + `}`
		req, err := http.NewRequestWithContext(t.Context(), "POST", ten.URL()+"/v1/agent/checkin", strings.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+out.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, 200, resp.StatusCode)
	}
	live := `{"observed_at":"2026-03-04T10:22:33.5Z","healthy":false,"services":[{"name":"app","state":"exited","health":"","exit_code":1,"restarts":3}]}`
	checkin(`,"live":` + live)
	status, body = do(t, srv, "GET", "/envs/env-dev-01/live", "")
	require.Equal(t, 200, status, body)
	assert.JSONEq(t, live, body, "the live object as it travels")
	status, body = do(t, srv, "GET", "/envs/env-dev-01/checkins", "")
	require.Equal(t, 200, status, body)
	var cs []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &cs))
	require.Len(t, cs, 1)
	assert.JSONEq(t, live, string(cs[0]["live"]))

	reason := `{"observed_at":"2026-03-04T10:23:00Z","reason":"docker: permission denied"}`
	checkin(`,"live":` + reason)
	status, body = do(t, srv, "GET", "/envs/env-dev-01/live", "")
	require.Equal(t, 200, status, body)
	assert.JSONEq(t, reason, body, "no healthy and no services with a reason")

	checkin("")
	status, _ = do(t, srv, "GET", "/envs/env-dev-01/live", "")
	assert.Equal(t, 404, status, "the latest check-in says nothing is live")
	status, body = do(t, srv, "GET", "/envs/env-dev-01/checkins", "")
	require.Equal(t, 200, status, body)
	cs = nil
	require.NoError(t, json.Unmarshal([]byte(body), &cs))
	require.Len(t, cs, 3)
	assert.NotContains(t, cs[2], "live", "a check-in without live lists none")
}

func TestPublishSignature(t *testing.T) {
	srv, ten, _ := setup(t)
	b, err := faketenancy.BuildBundle(faketenancy.BundleSpec{EnvID: "env-dev-01"})
	require.NoError(t, err)
	sha, _, err := ten.PublishBundle("env-dev-01", b.Data)
	require.NoError(t, err)

	status, body := do(t, srv, "PUT", "/envs/env-dev-01/bundles/"+sha+"/signature", "monky-deployd signature v1\n")
	require.Equal(t, 204, status, body)
	status, body = do(t, srv, "PUT", "/envs/env-dev-02/bundles/"+sha+"/signature", "x")
	assert.Equal(t, 404, status)
	assert.Contains(t, body, "not published for it")
	status, body = do(t, srv, "PUT", "/envs/env-dev-01/bundles/"+sha+"/signature", strings.Repeat("x", 64<<10+1))
	assert.Equal(t, 400, status)
	assert.Contains(t, body, "at most 65536 bytes")
}
