package faketenancy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

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
