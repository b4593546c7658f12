package faketenancy_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

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
		for _, r := range s.Requests() {
			if r.Path == "/v1/agent/checkin" && r.Status == 499 {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the held check-in is recorded as given up within seconds, not after the minute")
	assert.Zero(t, s.Delayed())
}
