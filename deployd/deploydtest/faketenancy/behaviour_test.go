package faketenancy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// reply is what post keeps of a response once its body is read and closed.
type reply struct {
	StatusCode int
	Header     http.Header
}

func post(t *testing.T, url, bearer, path string, body any) (reply, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, out
}

func TestLeaseBudgetRollingWindow(t *testing.T) {
	clk := deploydtest.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	s, auth := newFake(t, faketenancy.Options{LeaseBudget: 2, LeaseWindow: time.Hour, Now: clk.Now})
	tok := auth.Token("env-dev-01")
	sha, _, err := s.PublishBundle("env-dev-01", deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"}).Data)
	require.NoError(t, err)
	lease := func() reply {
		resp, _ := post(t, s.URL(), tok, "/v1/agent/lease", map[string]string{"env_id": "env-dev-01", "sha": sha})
		return resp
	}
	require.Equal(t, 200, lease().StatusCode) // 10:00
	clk.Advance(20 * time.Minute)
	require.Equal(t, 200, lease().StatusCode) // 10:20
	clk.Advance(10 * time.Minute)
	r := lease() // 10:30: the 10:00 lease frees its slot at 11:00
	require.Equal(t, 429, r.StatusCode)
	assert.Equal(t, "1800", r.Header.Get("Retry-After"))
	clk.Advance(30 * time.Minute)
	require.Equal(t, 200, lease().StatusCode, "the oldest lease left the window")
	assert.Len(t, s.Leases("env-dev-01"), 3)
}

// TestLeaseRequestSentAgain: the request_id of the last lease, for the same sha and
// while the lease lasts, is answered with the same lease and grant and costs no
// budget; another id, no id, another sha or an expired lease is a new lease, and a new
// lease ends the replay of the one before.
func TestLeaseRequestSentAgain(t *testing.T) {
	clk := deploydtest.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	s, auth := newFake(t, faketenancy.Options{LeaseBudget: 100, LeaseTTL: 10 * time.Minute, Now: clk.Now})
	tok := auth.Token("env-dev-01")
	publish := func(serial int64) string {
		sha, _, err := s.PublishBundle("env-dev-01", deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01", Serial: serial}).Data)
		require.NoError(t, err)
		return sha
	}
	sha1, sha2 := publish(1), publish(2)
	lease := func(sha, id string) string {
		t.Helper()
		body := map[string]string{"env_id": "env-dev-01", "sha": sha}
		if id != "" {
			body["request_id"] = id
		}
		resp, data := post(t, s.URL(), tok, "/v1/agent/lease", body)
		require.Equal(t, 200, resp.StatusCode, "%s", data)
		var l struct{ Grant string }
		require.NoError(t, json.Unmarshal(data, &l))
		return l.Grant
	}
	count := func() int { return len(s.Leases("env-dev-01")) }

	g := lease(sha1, "a1")
	assert.Equal(t, g, lease(sha1, "a1"), "the same request again: the same grant")
	assert.Equal(t, 1, count(), "and no second lease")
	assert.Equal(t, "a1", s.Leases("env-dev-01")[0].RequestID)
	assert.NotEqual(t, g, lease(sha1, ""), "no request id: a new lease")
	assert.Equal(t, 2, count())
	assert.NotEqual(t, g, lease(sha1, "a1"), "a new lease came in between: its grant superseded the first")
	assert.Equal(t, 3, count())

	g = lease(sha1, "b2")
	assert.NotEqual(t, g, lease(sha2, "b2"), "another sha under the same id: a new lease")
	assert.Equal(t, 5, count())

	g = lease(sha2, "c3")
	clk.Advance(10 * time.Minute)
	assert.NotEqual(t, g, lease(sha2, "c3"), "the lease expired: a new one")
	assert.Equal(t, 7, count())
}

func TestRequestsNeverHoldTheBearer(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{})
	tok := auth.Token("env-dev-01")
	post(t, s.URL(), tok, "/v1/agent/checkin", map[string]string{"env_id": "env-dev-01"})
	post(t, s.URL(), "garbage-"+tok, "/v1/agent/checkin", map[string]string{"env_id": "env-dev-01"})
	post(t, s.URL(), tok, "/v1/agent/report", map[string]string{"env_id": "env-dev-02", "result": "applied"})
	reqs := s.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, []int{200, 401, 409}, []int{reqs[0].Status, reqs[1].Status, reqs[2].Status})
	assert.Equal(t, "env-dev-01", reqs[0].EnvID)
	assert.Empty(t, reqs[1].EnvID)
	data, err := json.Marshal(reqs)
	require.NoError(t, err)
	assert.NotContains(t, string(data), tok)
}

func TestPublishBundle(t *testing.T) {
	s, _ := newFake(t, faketenancy.Options{})
	tests := []struct {
		name    string
		env     string
		data    []byte
		wantErr string
	}{
		{"empty_env", "", deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"}).Data, "env_id is required"},
		{"not_a_tar", "env-dev-01", []byte("hello"), "env-dev-01"},
		{"truncated", "env-dev-01", deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"}).Data[:700], "env-dev-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.PublishBundle(tt.env, tt.data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	b := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"})
	sha, serial, err := s.PublishBundle("env-dev-01", b.Data)
	require.NoError(t, err)
	assert.Equal(t, b.SHA, sha)
	assert.Equal(t, int64(1), serial)
	_, again, err := s.PublishBundle("env-dev-01", b.Data)
	require.NoError(t, err)
	assert.Equal(t, int64(1), again, "republishing the same bundle keeps its serial")
	_, _, err = s.PublishBundle("env-dev-02", b.Data)
	require.ErrorContains(t, err, "already published for env-dev-01")

	gz := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01", Gzip: true})
	gzSHA, serial, err := s.PublishBundle("env-dev-01", gz.Data)
	require.NoError(t, err)
	assert.Equal(t, sha, gzSHA, "compression does not change the sha")
	assert.Equal(t, int64(1), serial)
}

func TestWaitReport(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{})
	tok := auth.Token("env-dev-01")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := s.WaitReport(ctx, "env-dev-01", 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = s.WaitReport(t.Context(), "env-dev-01", 0)
	require.Error(t, err)

	done := make(chan faketenancy.Report, 1)
	go func() {
		r, err := s.WaitReport(context.Background(), "env-dev-01", 2)
		if err == nil {
			done <- r
		}
	}()
	for i, result := range []string{"failed", "applied"} {
		resp, body := post(t, s.URL(), tok, "/v1/agent/report", map[string]any{"env_id": "env-dev-01", "result": result, "serial": i + 1})
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", body)
	}
	select {
	case r := <-done:
		assert.Equal(t, "applied", r.Result)
		assert.Equal(t, int64(2), r.Serial)
	case <-time.After(5 * time.Second):
		t.Fatal("WaitReport did not return")
	}
}

func TestStrictBodies(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{})
	tok := auth.Token("env-dev-01")
	tests := []struct {
		name, path string
		body       any
		status     int
	}{
		{"unknown_field", "/v1/agent/checkin", map[string]any{"env_id": "env-dev-01", "desired_sha": "x"}, 400},
		{"no_env", "/v1/agent/checkin", map[string]any{}, 400},
		{"bad_sha", "/v1/agent/lease", map[string]any{"env_id": "env-dev-01", "sha": strings.Repeat("Z", 64)}, 400},
		{"unpublished_sha", "/v1/agent/lease", map[string]any{"env_id": "env-dev-01", "sha": strings.Repeat("a", 64)}, 404},
		{"negative_duration", "/v1/agent/report", map[string]any{"env_id": "env-dev-01", "result": "applied", "duration_ms": -1}, 400},
		{"unknown_call", "/v1/agent/register", map[string]any{}, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, s.URL(), tok, tt.path, tt.body)
			assert.Equal(t, tt.status, resp.StatusCode, "%s", body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		})
	}
	assert.Empty(t, s.Leases("env-dev-01"), "refused leases cost no budget")
}

// TestDelayedCallSeesTheClientGiveUp: a call held by a Delay fault is recorded as 499
// as soon as the client gives up, also when it carries a body (a check-in): the fake
// reads the body first, so that it learns of the closed connection.
func TestDelayedCallSeesTheClientGiveUp(t *testing.T) {
	s, _ := newFake(t, faketenancy.Options{})
	s.SetFaults(faketenancy.Faults{Delay: map[string]time.Duration{"checkin": time.Minute}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/agent/checkin", strings.NewReader(`{"env_id":"env-dev-01"}`))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return s.Delayed() > 0 }, 10*time.Second, 5*time.Millisecond, "the check-in reached the fake")
	cancel()
	<-done
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(s.Requests(), func(r faketenancy.Request) bool { return r.Path == "/v1/agent/checkin" && r.Status == 499 })
	}, 10*time.Second, 10*time.Millisecond, "the held check-in is recorded as given up within seconds, not after the minute")
	assert.Zero(t, s.Delayed())
}

func checkin(live any) map[string]any {
	b := map[string]any{"env_id": "env-dev-01", "agent_version": "0.1.0", "current_sha": "", "current_serial": 0,
		"last_result": "", "last_code": "", "host": map[string]any{"hostname": "h", "docker_version": "27", "free_mb": 1}}
	if live != nil {
		b["live"] = live
	}
	return b
}

func TestLiveRefusalsNameTheField(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{})
	tok := auth.Token("env-dev-01")
	now := "2026-03-04T10:22:33.5Z"
	svc := func(k string, v any) []any {
		m := map[string]any{"name": "app", "state": "running", "health": "", "exit_code": 0, "restarts": 0}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return []any{m}
	}
	tests := []struct {
		name string
		live any
		want string
	}{
		{"array", []any{}, "live must be an object"},
		{"no_observed_at", map[string]any{"healthy": true, "services": []any{}}, "live.observed_at is required"},
		{"observed_at_null", map[string]any{"observed_at": nil, "healthy": true, "services": []any{}}, "live.observed_at must be a string"},
		{"observed_at_not_rfc3339", map[string]any{"observed_at": "04/03/2026", "healthy": true, "services": []any{}}, "live.observed_at must be an RFC 3339 time"},
		{"healthy_number", map[string]any{"observed_at": now, "healthy": 1, "services": []any{}}, "live.healthy must be a boolean"},
		{"healthy_and_reason", map[string]any{"observed_at": now, "healthy": true, "reason": "x"}, "live.healthy and live.reason are exclusive"},
		{"services_and_reason", map[string]any{"observed_at": now, "reason": "x", "services": []any{}}, "live.services and live.reason are exclusive"},
		{"neither", map[string]any{"observed_at": now}, "live needs healthy"},
		{"healthy_without_services", map[string]any{"observed_at": now, "healthy": true}, "live.services is required with live.healthy"},
		{"empty_reason", map[string]any{"observed_at": now, "reason": ""}, "live.reason must not be empty"},
		{"long_reason", map[string]any{"observed_at": now, "reason": strings.Repeat("r", 513)}, "live.reason must be at most 512 bytes"},
		{"too_many_services", map[string]any{"observed_at": now, "healthy": true, "services": make([]any, 257)}, "live.services must hold at most 256"},
		{"service_null", map[string]any{"observed_at": now, "healthy": true, "services": []any{nil}}, "live.services[0] must be an object"},
		{"service_no_name", map[string]any{"observed_at": now, "healthy": true, "services": svc("name", nil)}, "live.services[0].name is required"},
		{"service_long_state", map[string]any{"observed_at": now, "healthy": true, "services": svc("state", strings.Repeat("s", 129))}, "live.services[0].state must be at most 128 bytes"},
		{"exit_code_bool", map[string]any{"observed_at": now, "healthy": false, "services": svc("exit_code", true)}, "live.services[0].exit_code must be an integer"},
		{"restarts_negative", map[string]any{"observed_at": now, "healthy": false, "services": svc("restarts", -2)}, "live.services[0].restarts must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, s.URL(), tok, "/v1/agent/checkin", checkin(tt.live))
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			assert.Contains(t, string(body), tt.want)
			assert.Contains(t, string(body), `"code":"BAD_REQUEST"`)
		})
	}
	assert.Empty(t, s.Checkins("env-dev-01"), "a refused check-in is not recorded")
}

func TestLastLive(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{})
	tok := auth.Token("env-dev-01")
	_, ok := s.LastLive("env-dev-01")
	assert.False(t, ok, "no check-in yet")

	resp, body := post(t, s.URL(), tok, "/v1/agent/checkin", checkin(map[string]any{
		"observed_at": "2026-03-04T11:22:33.5+01:00", "healthy": false, "future": []any{1},
		"services": []any{map[string]any{"name": "app", "state": "exited", "exit_code": 2, "restarts": 7, "pid": 1}},
	}))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	no := false
	want := faketenancy.Live{ObservedAt: time.Date(2026, 3, 4, 10, 22, 33, 5e8, time.UTC), Healthy: &no,
		Services: []faketenancy.LiveService{{Name: "app", State: "exited", ExitCode: 2, Restarts: 7}}}
	got, ok := s.LastLive("env-dev-01")
	require.True(t, ok)
	assert.True(t, want.ObservedAt.Equal(got.ObservedAt))
	got.ObservedAt = want.ObservedAt
	assert.Equal(t, want, got)

	// What the Go face returns is a copy: changing it changes nothing stored.
	*got.Healthy = true
	got.Services[0].Name = "changed"
	cs := s.Checkins("env-dev-01")
	require.Len(t, cs, 1)
	require.NotNil(t, cs[0].Live)
	cs[0].Live.Services[0].State = "changed"
	again, _ := s.LastLive("env-dev-01")
	assert.False(t, *again.Healthy)
	assert.Equal(t, "app", again.Services[0].Name)
	assert.Equal(t, "exited", again.Services[0].State)

	// A check-in with live: null, or without live, says nothing is live.
	for _, live := range []any{nil, map[string]any(nil)} {
		resp, body = post(t, s.URL(), tok, "/v1/agent/checkin", checkin(map[string]any{
			"observed_at": "2026-03-04T10:22:33Z", "reason": "docker: permission denied"}))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		got, ok = s.LastLive("env-dev-01")
		require.True(t, ok)
		assert.Equal(t, "docker: permission denied", got.Reason)
		assert.Nil(t, got.Healthy)
		assert.Nil(t, got.Services)

		b := checkin(nil)
		if live != nil {
			b["live"] = live
		}
		resp, body = post(t, s.URL(), tok, "/v1/agent/checkin", b)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		_, ok = s.LastLive("env-dev-01")
		assert.False(t, ok, "live %v: the latest check-in carries none", live)
	}
	assert.Len(t, s.Checkins("env-dev-01"), 5)
}
