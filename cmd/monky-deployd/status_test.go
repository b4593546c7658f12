package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// TestStatusListsFailedSHAsNewestFirst: status prints the failed shas newest first
// (by the time they failed; equal times by sha), never in map order.
func TestStatusListsFailedSHAsNewestFirst(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := deployd.State{Failed: map[string]deployd.Failure{}}
	var want []string
	for i := range 8 {
		sha := strings.Repeat(fmt.Sprintf("%x", 15-i), 64)
		// i 6 and 7 failed at the same time: by sha, "8…" before "9…".
		when := at.Add(-time.Duration(min(i, 6)) * time.Minute)
		st.Failed[sha] = deployd.Failure{Serial: int64(i + 1), Code: "PRIVILEGED", At: when}
		want = append(want, fmt.Sprintf("failed sha:    %s serial %d PRIVILEGED", sha, i+1))
	}
	want[6], want[7] = want[7], want[6]
	for range 5 { // map order differs between runs
		var b strings.Builder
		writeStatus(&b, buildStatus(deployd.Config{EnvID: "env-dev-01"}, st, tokenFile{state: tokenPresent}, at))
		var got []string
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(line, "failed sha:") {
				got = append(got, line)
			}
		}
		assert.Equal(t, want, got)
	}
}

// TestStatusPrintsLiveHealthWithoutControlCharacters: the live health shows each
// service; names and states come from docker and never reach the terminal raw.
func TestStatusPrintsLiveHealthWithoutControlCharacters(t *testing.T) {
	sha := strings.Repeat("a", 64)
	st := deployd.State{LiveSHA: sha, LiveSerial: 3, Confirmed: true, Live: &deployd.LiveHealth{
		SHA: sha, ObservedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Healthy: false,
		Services: []deployd.LiveService{
			{LiveService: tenancy.LiveService{Name: "web\x1b[2J", State: "exited", ExitCode: 137, Restarts: 2}},
		},
	}}
	var b strings.Builder
	writeStatus(&b, buildStatus(deployd.Config{EnvID: "env-dev-01"}, st, tokenFile{state: tokenPresent}, time.Now()))
	out := b.String()
	assert.Contains(t, out, "live health:   UNHEALTHY at 2026-12-01T09:00:00Z")
	assert.Contains(t, out, "web?[2J:")
	assert.Contains(t, out, "exited, exit code 137, 2 restarts")
	assert.NotContains(t, out, "\x1b")
}
