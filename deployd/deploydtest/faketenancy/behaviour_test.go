package faketenancy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
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

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestLeaseBudgetRollingWindow(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	s, auth := newFake(t, faketenancy.Options{LeaseBudget: 2, LeaseWindow: time.Hour, Now: clk.now})
	tok := auth.Token("env-dev-01")
	sha, _, err := s.PublishBundle("env-dev-01", deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: "env-dev-01"}).Data)
	require.NoError(t, err)
	lease := func() reply {
		resp, _ := post(t, s.URL(), tok, "/v1/agent/lease", map[string]string{"env_id": "env-dev-01", "sha": sha})
		return resp
	}
	require.Equal(t, 200, lease().StatusCode) // 10:00
	clk.add(20 * time.Minute)
	require.Equal(t, 200, lease().StatusCode) // 10:20
	clk.add(10 * time.Minute)
	r := lease() // 10:30: the 10:00 lease frees its slot at 11:00
	require.Equal(t, 429, r.StatusCode)
	assert.Equal(t, "1800", r.Header.Get("Retry-After"))
	clk.add(30 * time.Minute)
	require.Equal(t, 200, lease().StatusCode, "the oldest lease left the window")
	assert.Len(t, s.Leases("env-dev-01"), 3)
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
