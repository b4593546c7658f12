package zitimesh

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withoutOIDC removes the controller's edge-oidc API binding: the controller then
// stops advertising OIDC_AUTH and the SDK authenticates the legacy way, with an API
// session the controller stores and an operator can delete.
func withoutOIDC(c map[string]any) {
	web, _ := c["web"].([]any)
	for _, wb := range web {
		w, _ := wb.(map[string]any)
		apis, _ := w["apis"].([]any)
		kept := apis[:0]
		for _, a := range apis {
			if m, _ := a.(map[string]any); m["binding"] == "edge-oidc" {
				continue
			}
			kept = append(kept, a)
		}
		w["apis"] = kept
	}
}

// TestLoopLegacySessionDeleted runs `run --loop` against a controller without OIDC,
// where API sessions are stored by the controller, deletes the box's API session with
// `ziti edge delete api-sessions where identity=…` under the running loop, and checks
// that the loop authenticates again and its check-ins go on.
func TestLoopLegacySessionDeleted(t *testing.T) {
	t.Parallel() // with the other loop test: both mostly wait on the mesh
	zitiBin := zitiBinary(t)
	dir := t.TempDir()
	w := newWorld(t, zitiBin, dir)
	eventsPath := filepath.Join(dir, "controller-events.jsonl")
	began := time.Now()
	w.mesh.reconfigure(t, controllerEvents(eventsPath), withoutOIDC)
	probe := newProber(t, w, boxID)
	probe.wait(t, 2*time.Minute, "after OIDC was switched off")
	boxIdentity := w.mesh.identityID(t, loopBoxID)
	events := func() []ctrlEvent { return readEvents(t, eventsPath) }

	b := newLoopBox(t, w)
	checkins := func() int { return w.meshHits.count("/v1/agent/checkin") }

	artifacts := t.ArtifactDir()
	t.Cleanup(func() { copyFile(t, eventsPath, filepath.Join(artifacts, "controller-events.jsonl")) })
	loop := startLoop(t, b, b.config(t, "loop.yaml", sdkTenancy(w, w.ids[loopBoxID], tenancyService)), filepath.Join(artifacts, "agent.log"))
	loop.waitCheckins(t, checkins, 5, 2*time.Minute, probe, "check-ins of the loop")
	before := tally(events(), boxIdentity, began)
	t.Logf("before the deletion: %s", before)
	require.Equal(t, 1, before.Created, "one authentication: %s", before)
	require.Equal(t, map[string]int{"legacy": 1}, before.Types, "a legacy API session")

	deleted := time.Now()
	n := checkins()
	out := w.mesh.cli(t, "edge", "delete", "api-sessions", "where", fmt.Sprintf(`identity="%s"`, boxIdentity))
	t.Logf("ziti edge delete api-sessions: %s", out)
	require.Eventually(t, func() bool { return tally(events(), boxIdentity, deleted).Deleted > 0 }, time.Minute, 100*time.Millisecond,
		"the controller reports the deletion")

	// The loop must notice and authenticate again: wait for the new API session and
	// for check-ins after it.
	deadline := time.Now().Add(2 * time.Minute)
	for tally(events(), boxIdentity, deleted).Created == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no new API session within 2m of the deletion; %d check-ins since (%d failed ticks); stderr:\n%s",
				checkins()-n, loop.failuresBetween(deleted, time.Now()), loop.tail(60))
		}
		loop.sleepUntil(t, time.Now().Add(100*time.Millisecond))
	}
	reauth := time.Now()
	after := tally(events(), boxIdentity, deleted)
	m := checkins()
	loop.waitCheckins(t, checkins, m+5, time.Minute, probe, "check-ins after the new API session")
	t.Logf("new API session %s after the deletion (%d check-ins meanwhile, %d failed ticks: %s); %s",
		reauth.Sub(deleted).Round(time.Millisecond), m-n, loop.failuresBetween(deleted, reauth), loop.firstFailure(deleted), after)
	assert.Equal(t, 1, after.Created, "one new authentication: %s", after)
	for _, r := range loop.between(deleted, time.Now()) {
		if r.duration > 2*time.Second || !r.ok {
			t.Logf("a tick after the deletion: %s", r.line)
		}
	}
}
