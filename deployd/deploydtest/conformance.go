package deploydtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/fakes/loopback"
)

// ConformanceTarget is a server under test by Conformance: the fake tenancy or the
// real monky-tenancy, reached through hooks the target implements.
type ConformanceTarget struct {
	// BaseURL of the agent API (required).
	BaseURL string
	// Client reaches it; default a client with a 30s timeout.
	Client *http.Client
	// EnvA and EnvB are two distinct environments (required). The suite spends up to
	// three leases of EnvA and the whole lease budget of EnvB: use fresh environments.
	EnvA, EnvB string
	// Token returns a live bearer (OpenBao token) of envID (required).
	Token func(t testing.TB, envID string) string
	// Publish publishes bundle for envID and returns its sha and serial (required).
	Publish func(t testing.TB, envID string, bundle []byte) (sha string, serial int64)
	// SetDesired sets what envID's check-ins answer (required). With apply and
	// Serial 0 the target takes the serial the sha was published with.
	SetDesired func(t testing.TB, envID string, d faketenancy.Desired)
	// LeaseBudget is the number of leases per environment and window; default 5.
	LeaseBudget int
	// LeaseWindow is the rolling window of the budget; default 1h.
	LeaseWindow time.Duration
	// AuthMount and Role every lease must name; defaults "jwt-tenancy", "see-env".
	AuthMount, Role string
	// LastLive returns the live object of envID's latest check-in as the target stored
	// it, false when that check-in carried none (optional: without it the suite checks
	// only that check-ins with live are accepted or refused, not what was kept).
	LastLive func(t testing.TB, envID string) (faketenancy.Live, bool)
	// PublishSignature stores sig as the signature of the bundle sha published for
	// envID (optional: without it the suite skips the signature call, which is
	// additive — a tenancy that does not know it answers 404, "unsigned").
	PublishSignature func(t testing.TB, envID, sha string, sig []byte)
}

// Conformance checks target against the agent API contract (docs/PROTOCOL.md,
// docs/PROTOCOL.md): statuses, JSON shapes, error bodies, authentication, environment
// pinning, the lease budget, the signature call (with PublishSignature) and the
// check-in's live object (accepted with or without
// it, unknown fields inside it ignored, a malformed one refused with 400). It speaks
// raw HTTP, so it depends on no client.
func Conformance(t *testing.T, target ConformanceTarget) {
	t.Helper()
	c := newConformance(t, target)
	t.Run("unauthenticated", c.unauthenticated)
	t.Run("checkin", c.checkin)
	t.Run("live", c.live)
	t.Run("bundle", c.bundle)
	t.Run("signature", c.signature)
	t.Run("lease", c.lease)
	t.Run("report", c.report)
	t.Run("env_mismatch", c.envMismatch)
	t.Run("lease_budget", c.leaseBudget)
}

type conformance struct {
	ConformanceTarget
}

func newConformance(t *testing.T, tg ConformanceTarget) *conformance {
	require.NotEmpty(t, tg.BaseURL, "ConformanceTarget.BaseURL")
	require.NotEmpty(t, tg.EnvA, "ConformanceTarget.EnvA")
	require.NotEmpty(t, tg.EnvB, "ConformanceTarget.EnvB")
	require.NotEqual(t, tg.EnvA, tg.EnvB, "ConformanceTarget.EnvA and EnvB must differ")
	require.NotNil(t, tg.Token, "ConformanceTarget.Token")
	require.NotNil(t, tg.Publish, "ConformanceTarget.Publish")
	require.NotNil(t, tg.SetDesired, "ConformanceTarget.SetDesired")
	if tg.Client == nil {
		tg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	loopback.Default(&tg.LeaseBudget, 5)
	loopback.Default(&tg.LeaseWindow, time.Hour)
	loopback.Default(&tg.AuthMount, "jwt-tenancy")
	loopback.Default(&tg.Role, "see-env")
	tg.BaseURL = strings.TrimRight(tg.BaseURL, "/")
	return &conformance{tg}
}

// response is one answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (c *conformance) do(t *testing.T, method, path, bearer string, body any) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, c.BaseURL+path, rd)
	require.NoError(t, err)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("User-Agent", "monky-deployd/conformance")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer func() { _ = resp.Body.Close() }() // the body has been read; nothing to report
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// object decodes a JSON object answer and checks its Content-Type.
func object(t *testing.T, r response) map[string]any {
	t.Helper()
	mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	require.NoError(t, err, "Content-Type %q", r.header.Get("Content-Type"))
	assert.Equal(t, "application/json", mt)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m), "the body must be a JSON object")
	return m
}

// errorCode checks the error body shape {"error":{"code","message"}} and returns code.
func errorCode(t *testing.T, r response) string {
	t.Helper()
	m := object(t, r)
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "error body must be {\"error\":{…}}: %s", r.body)
	code, ok := e["code"].(string)
	require.True(t, ok && code != "", "error.code must be a non-empty string")
	_, ok = e["message"].(string)
	require.True(t, ok, "error.message must be a string")
	return code
}

// refused checks that r is 400 with an error body; what says what was sent.
func refused(t *testing.T, r response, what string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, r.status, "%s is refused: %s", what, r.body)
	errorCode(t, r)
}

func integer(t *testing.T, m map[string]any, field string) int64 {
	t.Helper()
	n, ok := m[field].(json.Number)
	require.True(t, ok, "field %s must be a number, got %T", field, m[field])
	v, err := n.Int64()
	require.NoError(t, err, "field %s must be an integer", field)
	return v
}

func boolean(t *testing.T, m map[string]any, field string) bool {
	t.Helper()
	v, present := m[field]
	if !present {
		return false
	}
	b, ok := v.(bool)
	require.True(t, ok, "field %s must be a boolean, got %T", field, v)
	return b
}

func (c *conformance) checkinBody(env string) map[string]any {
	return map[string]any{
		"env_id": env, "agent_version": "0.0.0-conformance", "current_sha": "", "current_serial": 0,
		"last_result": "", "last_code": "",
		"host": map[string]any{"hostname": "conformance", "docker_version": "27.0.0", "free_mb": 4096},
	}
}

func (c *conformance) reportBody(env, sha string, serial int64) map[string]any {
	return map[string]any{
		"env_id": env, "sha": sha, "serial": serial, "result": "applied", "code": "", "detail": "",
		"tail": "", "services": []any{map[string]any{"name": "app", "state": "running", "health": ""}},
		"duration_ms": 1234,
	}
}

func (c *conformance) publish(t *testing.T, env string, serial int64) (faketenancy.Bundle, int64) {
	t.Helper()
	b := MakeBundle(t, faketenancy.BundleSpec{EnvID: env, Serial: serial, Files: map[string]string{
		"compose.yaml":    faketenancy.DefaultCompose,
		"config/app.toml": "serial = " + strconv.FormatInt(serial, 10) + "\n" + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n",
	}})
	sha, got := c.Publish(t, env, b.Data)
	require.Equal(t, b.SHA, sha, "Publish must answer the bundle sha of docs/BUNDLE.md")
	require.GreaterOrEqual(t, got, int64(1), "serial")
	return b, got
}

func (c *conformance) unauthenticated(t *testing.T) {
	const garbage = "not-a-live-token-3f9c2a77e1"
	sha := strings.Repeat("ab", 32)
	calls := []struct {
		name, method, path string
		body               any
	}{
		{"checkin", http.MethodPost, "/v1/agent/checkin", c.checkinBody(c.EnvA)},
		{"bundle", http.MethodGet, "/v1/agent/bundles/" + sha, nil},
		{"lease", http.MethodPost, "/v1/agent/lease", map[string]any{"env_id": c.EnvA, "sha": sha}},
		{"report", http.MethodPost, "/v1/agent/report", c.reportBody(c.EnvA, sha, 1)},
	}
	for _, call := range calls {
		for _, bearer := range []string{"", garbage} {
			name := call.name + "/no_bearer"
			if bearer != "" {
				name = call.name + "/garbage_bearer"
			}
			t.Run(name, func(t *testing.T) {
				r := c.do(t, call.method, call.path, bearer, call.body)
				require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
				assert.Equal(t, string(codes.Unauthenticated), errorCode(t, r))
				if bearer != "" {
					assert.NotContains(t, string(r.body), bearer, "an error body must not echo the bearer")
				}
			})
		}
	}
}

func (c *conformance) checkin(t *testing.T) {
	tok := c.Token(t, c.EnvA)
	post := func(t *testing.T) map[string]any {
		t.Helper()
		r := c.do(t, http.MethodPost, "/v1/agent/checkin", tok, c.checkinBody(c.EnvA))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		m := object(t, r)
		assert.GreaterOrEqual(t, integer(t, m, "next_checkin_s"), int64(0))
		return m
	}
	t.Run("none", func(t *testing.T) {
		c.SetDesired(t, c.EnvA, faketenancy.Desired{Action: "none"})
		m := post(t)
		assert.Equal(t, "none", m["action"])
	})
	t.Run("apply_after_publish", func(t *testing.T) {
		b1, s1 := c.publish(t, c.EnvA, 1)
		m := post(t)
		assert.Equal(t, "apply", m["action"])
		assert.Equal(t, b1.SHA, m["sha"])
		assert.Equal(t, s1, integer(t, m, "serial"))
		assert.False(t, boolean(t, m, "retry"))
		assert.False(t, boolean(t, m, "rollback"))

		b2, s2 := c.publish(t, c.EnvA, 2)
		m = post(t)
		assert.Equal(t, b2.SHA, m["sha"], "the newest publish is desired")
		assert.Greater(t, integer(t, m, "serial"), s1)
		assert.Equal(t, s2, integer(t, m, "serial"))
		sha, _ := m["sha"].(string)
		require.True(t, ids.ValidSHA(sha), "sha %v is 64 lowercase hex digits", m["sha"])
	})
	t.Run("apply_retry_rollback", func(t *testing.T) {
		b, s := c.publish(t, c.EnvA, 3)
		c.SetDesired(t, c.EnvA, faketenancy.Desired{Action: "apply", SHA: b.SHA, Serial: s, Retry: true, Rollback: true})
		m := post(t)
		assert.Equal(t, "apply", m["action"])
		assert.True(t, boolean(t, m, "retry"))
		assert.True(t, boolean(t, m, "rollback"))
	})
	t.Run("down_purge", func(t *testing.T) {
		c.SetDesired(t, c.EnvA, faketenancy.Desired{Action: "down", Purge: true})
		m := post(t)
		assert.Equal(t, "down", m["action"])
		assert.True(t, boolean(t, m, "purge"))
	})
	t.Run("bad_body", func(t *testing.T) {
		refused(t, c.do(t, http.MethodPost, "/v1/agent/checkin", tok, map[string]any{"env_id": c.EnvA, "last_result": "up"}), "last_result up")
	})
}

func (c *conformance) live(t *testing.T) {
	tok := c.Token(t, c.EnvA)
	c.SetDesired(t, c.EnvA, faketenancy.Desired{Action: "none"})
	at := time.Date(2026, 3, 4, 10, 22, 33, 123_000_000, time.UTC)
	post := func(t *testing.T, live any) response {
		t.Helper()
		body := c.checkinBody(c.EnvA)
		if live != nil {
			body["live"] = live
		}
		return c.do(t, http.MethodPost, "/v1/agent/checkin", tok, body)
	}
	accepted := func(t *testing.T, live any) {
		t.Helper()
		r := post(t, live)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		m := object(t, r)
		assert.Equal(t, "none", m["action"], "live changes nothing of the answer")
	}
	stored := func(t *testing.T, want *faketenancy.Live) {
		t.Helper()
		if c.LastLive == nil {
			t.Log("ConformanceTarget.LastLive is nil: what the target kept is not checked")
			return
		}
		got, ok := c.LastLive(t, c.EnvA)
		if want == nil {
			assert.False(t, ok, "a check-in without live says nothing is live: %+v", got)
			return
		}
		require.True(t, ok, "the live object of the latest check-in is kept")
		assert.True(t, want.ObservedAt.Equal(got.ObservedAt), "observed_at: want %s, got %s", want.ObservedAt, got.ObservedAt)
		got.ObservedAt = want.ObservedAt
		assert.Equal(t, *want, got)
	}
	yes, no := true, false
	t.Run("unhealthy_with_services", func(t *testing.T) {
		accepted(t, map[string]any{"observed_at": at.Format(time.RFC3339Nano), "healthy": false, "services": []any{
			map[string]any{"name": "app", "state": "restarting", "health": "unhealthy", "exit_code": 137, "restarts": 4},
			map[string]any{"name": "db", "state": "running", "health": "healthy", "exit_code": 0, "restarts": 0},
		}})
		stored(t, &faketenancy.Live{ObservedAt: at, Healthy: &no, Services: []faketenancy.LiveService{
			{Name: "app", State: "restarting", Health: "unhealthy", ExitCode: 137, Restarts: 4},
			{Name: "db", State: "running", Health: "healthy"},
		}})
	})
	t.Run("healthy_no_services", func(t *testing.T) {
		accepted(t, map[string]any{"observed_at": at.Format(time.RFC3339Nano), "healthy": true, "services": []any{}})
		stored(t, &faketenancy.Live{ObservedAt: at, Healthy: &yes, Services: []faketenancy.LiveService{}})
	})
	t.Run("reason", func(t *testing.T) {
		accepted(t, map[string]any{"observed_at": "2026-03-04T10:22:33Z", "reason": "docker: context deadline exceeded"})
		stored(t, &faketenancy.Live{ObservedAt: at.Truncate(time.Second), Reason: "docker: context deadline exceeded"})
	})
	t.Run("without_live", func(t *testing.T) {
		accepted(t, nil)
		stored(t, nil)
	})
	t.Run("unknown_fields_ignored", func(t *testing.T) {
		accepted(t, map[string]any{"observed_at": at.Format(time.RFC3339Nano), "healthy": true, "cpu_pct": 12.5,
			"probe": map[string]any{"source": "docker"}, "services": []any{
				map[string]any{"name": "app", "state": "running", "health": "", "exit_code": 0, "restarts": 1, "image": "app:1.2"},
			}})
		stored(t, &faketenancy.Live{ObservedAt: at, Healthy: &yes, Services: []faketenancy.LiveService{
			{Name: "app", State: "running", Restarts: 1},
		}})
	})
	t.Run("malformed", func(t *testing.T) { liveMalformed(t, at, post) })
}

// liveMalformed posts check-ins whose live object breaks its shape: each is refused.
func liveMalformed(t *testing.T, at time.Time, post func(*testing.T, any) response) {
	now := at.Format(time.RFC3339Nano)
	svc := func(k string, v any) []any {
		s := map[string]any{"name": "app", "state": "running", "health": "", "exit_code": 0, "restarts": 0}
		s[k] = v
		return []any{s}
	}
	for name, live := range map[string]any{
		"not_an_object":         "healthy",
		"observed_at_number":    map[string]any{"observed_at": 1741083753, "healthy": true, "services": []any{}},
		"observed_at_not_time":  map[string]any{"observed_at": "yesterday", "healthy": true, "services": []any{}},
		"healthy_string":        map[string]any{"observed_at": now, "healthy": "yes", "services": []any{}},
		"healthy_and_reason":    map[string]any{"observed_at": now, "healthy": false, "reason": "docker: timeout"},
		"services_object":       map[string]any{"observed_at": now, "healthy": true, "services": map[string]any{"app": "running"}},
		"exit_code_string":      map[string]any{"observed_at": now, "healthy": false, "services": svc("exit_code", "137")},
		"restarts_fraction":     map[string]any{"observed_at": now, "healthy": false, "services": svc("restarts", 1.5)},
		"service_name_number":   map[string]any{"observed_at": now, "healthy": false, "services": svc("name", 7)},
		"reason_number":         map[string]any{"observed_at": now, "reason": 503},
		"services_with_reason":  map[string]any{"observed_at": now, "reason": "docker: timeout", "services": svc("state", "running")},
		"service_not_an_object": map[string]any{"observed_at": now, "healthy": true, "services": []any{"app"}},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, post(t, live), "a malformed live object")
		})
	}
}

func (c *conformance) bundle(t *testing.T) {
	tok := c.Token(t, c.EnvA)
	b, _ := c.publish(t, c.EnvA, 4)
	t.Run("bytes", func(t *testing.T) {
		r := c.do(t, http.MethodGet, "/v1/agent/bundles/"+b.SHA, tok, nil)
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, b.Data, r.body, "the bundle is served byte for byte")
		mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
		require.NoError(t, err)
		assert.Contains(t, []string{"application/x-tar", "application/gzip", "application/x-gzip", "application/octet-stream"}, mt)
	})
	t.Run("unknown_sha", func(t *testing.T) {
		r := c.do(t, http.MethodGet, "/v1/agent/bundles/"+strings.Repeat("0", 64), tok, nil)
		require.Equal(t, http.StatusNotFound, r.status)
		errorCode(t, r)
	})
	t.Run("other_env", func(t *testing.T) {
		other, _ := c.publish(t, c.EnvB, 1)
		r := c.do(t, http.MethodGet, "/v1/agent/bundles/"+other.SHA, tok, nil)
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict}, r.status,
			"a bundle of another environment is not served")
		assert.NotEqual(t, other.Data, r.body)
		errorCode(t, r)
	})
}

// signature checks GET /v1/agent/bundles/<sha>/signature: the file byte for byte as
// text/plain, 404 for a bundle without one or an unknown sha, another environment's
// answered as its bundle would be, and a bearer required.
func (c *conformance) signature(t *testing.T) {
	if c.PublishSignature == nil {
		t.Skip("ConformanceTarget.PublishSignature is not set: the signature call is not checked")
	}
	tok := c.Token(t, c.EnvA)
	signed, _ := c.publish(t, c.EnvA, 5)
	unsigned, _ := c.publish(t, c.EnvA, 6)
	// Not a valid signature: tenancy stores and serves the file, it does not check it.
	sig := []byte("monky-deployd signature v1\nalg ed25519\nkey_id 0123456789abcdef\nenv_id " + c.EnvA +
		"\nsha " + signed.SHA + "\nserial 5\nsig AAAA\n")
	c.PublishSignature(t, c.EnvA, signed.SHA, sig)
	path := func(sha string) string { return "/v1/agent/bundles/" + sha + "/signature" }
	t.Run("bytes", func(t *testing.T) {
		r := c.do(t, http.MethodGet, path(signed.SHA), tok, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		assert.Equal(t, sig, r.body, "the signature is served byte for byte")
		mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
		require.NoError(t, err)
		assert.Equal(t, "text/plain", mt)
	})
	t.Run("unsigned", func(t *testing.T) {
		r := c.do(t, http.MethodGet, path(unsigned.SHA), tok, nil)
		require.Equal(t, http.StatusNotFound, r.status, "a bundle without a signature is 404")
		errorCode(t, r)
	})
	t.Run("unknown_sha", func(t *testing.T) {
		r := c.do(t, http.MethodGet, path(strings.Repeat("0", 64)), tok, nil)
		require.Equal(t, http.StatusNotFound, r.status)
	})
	t.Run("other_env", func(t *testing.T) {
		other, _ := c.publish(t, c.EnvB, 3)
		c.PublishSignature(t, c.EnvB, other.SHA, []byte("monky-deployd signature v1\n"))
		r := c.do(t, http.MethodGet, path(other.SHA), tok, nil)
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict}, r.status,
			"a signature of another environment is not served")
		errorCode(t, r)
	})
	t.Run("unauthenticated", func(t *testing.T) {
		r := c.do(t, http.MethodGet, path(signed.SHA), "", nil)
		require.Equal(t, http.StatusUnauthorized, r.status)
		assert.Equal(t, string(codes.Unauthenticated), errorCode(t, r))
	})
}

func (c *conformance) lease(t *testing.T) {
	tok := c.Token(t, c.EnvA)
	b, _ := c.publish(t, c.EnvA, 5)
	r := c.do(t, http.MethodPost, "/v1/agent/lease", tok, map[string]any{"env_id": c.EnvA, "sha": b.SHA})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	m := object(t, r)
	for _, f := range []string{"role_id", "secret_id", "wrap_info", "wrapping_token"} {
		assert.NotContains(t, m, f, "a lease has no AppRole or wrapped field")
	}
	grant, ok := m["grant"].(string)
	require.True(t, ok, "grant must be a string")
	parts := strings.Split(grant, ".")
	require.Len(t, parts, 3, "the grant is a JWT")
	hdr, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err, "JWT header is base64url")
	var h map[string]any
	require.NoError(t, json.Unmarshal(hdr, &h), "JWT header is JSON")
	assert.NotEmpty(t, h["alg"], "JWT header has alg")
	assert.Equal(t, c.AuthMount, m["auth_mount"])
	assert.Equal(t, c.Role, m["role"])
	exp, ok := m["expires_at"].(string)
	require.True(t, ok, "expires_at must be a string")
	at, err := time.Parse(time.RFC3339, exp)
	require.NoError(t, err, "expires_at is RFC 3339")
	assert.True(t, at.After(time.Now()), "expires_at is in the future")

	t.Run("bad_sha", func(t *testing.T) {
		refused(t, c.do(t, http.MethodPost, "/v1/agent/lease", tok, map[string]any{"env_id": c.EnvA, "sha": "down"}), "sha down")
	})
}

func (c *conformance) report(t *testing.T) {
	tok := c.Token(t, c.EnvA)
	sha := strings.Repeat("cd", 32)
	t.Run("accepted", func(t *testing.T) {
		for _, result := range []string{"applied", "failed", "down"} {
			body := c.reportBody(c.EnvA, sha, 7)
			body["result"] = result
			if result == "failed" {
				body["code"], body["detail"], body["tail"] = codes.Unhealthy, "service app is unhealthy", "app  | boom\n"
			}
			r := c.do(t, http.MethodPost, "/v1/agent/report", tok, body)
			require.Equal(t, http.StatusNoContent, r.status, "result %s: %s", result, r.body)
			assert.Empty(t, r.body, "204 has no body")
		}
	})
	t.Run("unknown_result", func(t *testing.T) {
		for _, result := range []string{"up", "absent", ""} {
			body := c.reportBody(c.EnvA, sha, 7)
			body["result"] = result
			refused(t, c.do(t, http.MethodPost, "/v1/agent/report", tok, body), "result "+result)
		}
	})
}

func (c *conformance) envMismatch(t *testing.T) {
	tokA := c.Token(t, c.EnvA)
	other, _ := c.publish(t, c.EnvB, 2)
	calls := []struct {
		name, path string
		body       any
	}{
		{"checkin", "/v1/agent/checkin", c.checkinBody(c.EnvB)},
		{"lease", "/v1/agent/lease", map[string]any{"env_id": c.EnvB, "sha": other.SHA}},
		{"report", "/v1/agent/report", c.reportBody(c.EnvB, other.SHA, 1)},
	}
	for _, call := range calls {
		t.Run(call.name, func(t *testing.T) {
			r := c.do(t, http.MethodPost, call.path, tokA, call.body)
			require.Contains(t, []int{http.StatusConflict, http.StatusForbidden}, r.status, "%s", r.body)
			assert.Equal(t, string(codes.AgentEnvMismatch), errorCode(t, r))
		})
	}
}

func (c *conformance) leaseBudget(t *testing.T) {
	tok := c.Token(t, c.EnvB)
	b, _ := c.publish(t, c.EnvB, 3)
	body := map[string]any{"env_id": c.EnvB, "sha": b.SHA}
	for i := range c.LeaseBudget {
		r := c.do(t, http.MethodPost, "/v1/agent/lease", tok, body)
		require.Equal(t, http.StatusOK, r.status, "lease %d of a budget of %d: %s", i+1, c.LeaseBudget, r.body)
	}
	r := c.do(t, http.MethodPost, "/v1/agent/lease", tok, body)
	require.Equal(t, http.StatusTooManyRequests, r.status, "lease %d is past the budget", c.LeaseBudget+1)
	assert.Equal(t, string(codes.RateLimited), errorCode(t, r))
	ra := r.header.Get("Retry-After")
	require.NotEmpty(t, ra, "429 carries Retry-After")
	secs, err := strconv.ParseInt(ra, 10, 64)
	if err != nil {
		at, derr := http.ParseTime(ra)
		require.NoError(t, derr, "Retry-After %q is neither seconds nor an HTTP date", ra)
		secs = int64(math.Ceil(time.Until(at).Seconds()))
	}
	assert.Greater(t, secs, int64(0), "Retry-After is in the future")
	assert.LessOrEqual(t, secs, int64(c.LeaseWindow/time.Second)+1, "Retry-After is within the window")

	t.Run("other_env_unaffected", func(t *testing.T) {
		tokA := c.Token(t, c.EnvA)
		a, _ := c.publish(t, c.EnvA, 6)
		r := c.do(t, http.MethodPost, "/v1/agent/lease", tokA, map[string]any{"env_id": c.EnvA, "sha": a.SHA})
		require.Equal(t, http.StatusOK, r.status, "the budget is per environment: %s", r.body)
	})
}
