package main

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/golden"
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

// statusAt is a fixed time of the status goldens.
var statusAt = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// writeState writes st as the box's state.json, as the agent would.
func writeState(t *testing.T, b *box, st deployd.State) {
	t.Helper()
	st.Schema, st.EnvID = 1, b.Env
	data, err := json.MarshalIndent(st, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), data, 0o600))
}

// statusJSONOf runs status --json, checks its exit code and decodes its view.
func statusJSONOf(t *testing.T, b *box, code int) statusJSON {
	t.Helper()
	r := runMain(t, b.procEnv(), "status", "--config", b.CfgPath, "--json")
	require.Equal(t, code, r.Code, r.Stderr)
	var v statusJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &v))
	return v
}

// statusGolden runs status and status --json, checks their exit code and compares
// both with the goldens name.txt and name.json (the box's directory written /BOX).
func statusGolden(t *testing.T, b *box, name string, code int) statusJSON {
	t.Helper()
	r := runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
	require.Equal(t, code, r.Code, r.Stderr)
	golden.Assert(t, "golden/"+name+".txt", []byte(strings.ReplaceAll(r.Stdout, b.Dir, "/BOX")))
	r = runMain(t, b.procEnv(), "status", "--config", b.CfgPath, "--json")
	require.Equal(t, code, r.Code, r.Stderr)
	golden.Assert(t, "golden/"+name+".json", []byte(strings.ReplaceAll(r.Stdout, b.Dir, "/BOX")))
	var v statusJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &v))
	assert.Equal(t, 1, v.Schema)
	assert.Equal(t, code == 0, v.Healthy)
	assert.NotNil(t, v.Problems, "problems is always a list")
	assert.NotNil(t, v.FailedSHAs, "failed_shas is always a list")
	return v
}

// TestStatusView: the text and the versioned JSON view of status for the states an
// operator meets, and the exit code: 0 healthy, 1 not (the last run failed, a latch,
// no usable token).
func TestStatusView(t *testing.T) {
	sha := strings.Repeat("a", 64)
	tokenExpires := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	withToken := func(t *testing.T, b *box) {
		t.Helper()
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte("hvs.status-golden-token-0123456789\n"), 0o600))
	}
	applied := deployd.State{
		LiveSHA: sha, LiveSerial: 4, Confirmed: true,
		LastCheckin: statusAt, LastAction: "none", LastResult: "applied", LastSHA: sha,
		LastTick: statusAt, LastExit: 0, TokenExpires: tokenExpires,
	}
	// tokenStatus runs status on a box with a token and the state applied changed by
	// edit, and checks its output against the goldens name and its exit code.
	tokenStatus := func(t *testing.T, name string, exit int, edit func(b *box, st *deployd.State)) statusJSON {
		t.Helper()
		b := newBox(t, boxOpts{})
		withToken(t, b)
		st := applied
		edit(b, &st)
		writeState(t, b, st)
		return statusGolden(t, b, name, exit)
	}

	t.Run("fresh box", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		v := statusGolden(t, b, "status-missing", 1)
		require.Len(t, v.Problems, 1)
		assert.Equal(t, codes.Unauthenticated, v.Problems[0].Code)
		assert.Equal(t, deployd.NextStep(codes.Unauthenticated), v.Problems[0].NextStep)
		assert.Equal(t, "missing", v.Token.State)
		assert.Nil(t, v.LastRun)
		assert.Nil(t, v.Live)
	})

	t.Run("healthy", func(t *testing.T) {
		v := tokenStatus(t, "status-healthy", 0, func(b *box, st *deployd.State) {
			// An old failure is told, but the box is healthy again.
			st.LastFailure = &deployd.RunFailure{At: statusAt.Add(-time.Hour), Exit: 1, Code: codes.Unauthenticated}
			st.Failed = map[string]deployd.Failure{strings.Repeat("b", 64): {Serial: 3, Code: codes.Privileged, Detail: "service web: privileged", At: statusAt.Add(-2 * time.Hour)}}
			st.Live = &deployd.LiveHealth{SHA: sha, ObservedAt: statusAt, Healthy: true, Services: []deployd.LiveService{
				{LiveService: tenancy.LiveService{Name: "migrate", State: "exited"}, Ready: true},
				{LiveService: tenancy.LiveService{Name: "web", State: "running", Health: "healthy", Restarts: 1}, Ready: true},
			}}
			st.LastReclaim = &deployd.Reclaim{At: statusAt.Add(-30 * time.Minute), Images: 2, Bytes: 3 << 20}
		})
		assert.Empty(t, v.Problems)
		assert.Equal(t, "present", v.Token.State)
		require.NotNil(t, v.LastFailure)
		assert.Equal(t, codes.Unauthenticated, v.LastFailure.Code)
		assert.Empty(t, v.LastRun.Code)
	})

	t.Run("token refused", func(t *testing.T) {
		v := tokenStatus(t, "status-unauthenticated", 1, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(time.Minute), 1
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 1, Code: codes.Unauthenticated}
		})
		require.Len(t, v.Problems, 1)
		assert.Equal(t, codes.Unauthenticated, v.Problems[0].Code)
		assert.Equal(t, "refused", v.Token.State, "a token the last run was refused with is not fine")
		assert.Equal(t, codes.Unauthenticated, v.LastRun.Code)
	})

	t.Run("failed apply", func(t *testing.T) {
		v := tokenStatus(t, "status-failed-apply", 1, func(b *box, st *deployd.State) {
			bad := strings.Repeat("c", 64)
			st.LastTick, st.LastExit = statusAt.Add(time.Minute), 1
			st.LastResult, st.LastCode, st.LastSHA = "failed", codes.Unhealthy, bad
			st.LastDetail = "service web: unhealthy; restore: restored-healthy aaaaaaaaaaaa"
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 1, Code: codes.Unhealthy}
			st.LastRestore = &deployd.Restore{Result: deployd.RestoreHealthy, SHA: sha, At: st.LastTick}
			st.Failed = map[string]deployd.Failure{bad: {Serial: 5, Code: codes.Unhealthy, Detail: "service web: unhealthy", At: st.LastTick}}
		})
		require.Len(t, v.Problems, 1)
		assert.Equal(t, deployd.NextStep(codes.Unhealthy), v.Problems[0].NextStep)
		assert.Equal(t, "present", v.Token.State)
		require.NotNil(t, v.LastRestore)
		assert.False(t, v.LastRestore.Degraded)
	})

	t.Run("latched", func(t *testing.T) {
		v := tokenStatus(t, "status-latched", 1, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(time.Minute), 78
			st.LastCode = codes.AgentEnvMismatch
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 78, Code: codes.AgentEnvMismatch}
			st.EnvMismatch = &deployd.Latch{EnvID: b.Env, At: st.LastTick, Message: "token is for env-dev-02"}
		})
		require.Len(t, v.Problems, 1, "the latch and the run that set it are one problem")
		assert.Equal(t, codes.AgentEnvMismatch, v.Problems[0].Code)
		require.NotNil(t, v.Latch)
		assert.True(t, v.Latch.Active)
	})

	t.Run("temporary", func(t *testing.T) {
		v := tokenStatus(t, "status-temporary", 0, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(time.Minute), 75
			st.LastTemporary, st.RetryAfter = codes.RateLimited, 30*time.Second
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 75, Code: codes.RateLimited}
		})
		assert.Empty(t, v.Problems, "a 75 is retried by the next tick: not a failure")
		require.NotNil(t, v.Temporary)
		assert.Equal(t, codes.RateLimited, v.Temporary.Code)
		assert.Equal(t, 30, v.Temporary.RetryAfterSeconds)
	})

	t.Run("expired token", func(t *testing.T) {
		v := tokenStatus(t, "status-expired", 1, func(b *box, st *deployd.State) {
			st.TokenExpires = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		})
		assert.Equal(t, "expired", v.Token.State)
		require.Len(t, v.Problems, 1)
		assert.Equal(t, codes.Unauthenticated, v.Problems[0].Code)
	})

	t.Run("corrupt token", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		writeState(t, b, applied)
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 64), 0o600))
		v := statusGolden(t, b, "status-corrupt-token", 1)
		assert.Equal(t, "corrupt", v.Token.State)
		require.Len(t, v.Problems, 1)
		assert.Equal(t, codes.Unauthenticated, v.Problems[0].Code)
	})
}

// TestStatusAfterRevokedToken: after OpenBao (for tenancy) revoked the token, status
// does not call the token fine: it shows the last run's UNAUTHENTICATED, when, and
// the next step, and exits 1; after a bootstrap with a fresh grant it is healthy.
func TestStatusAfterRevokedToken(t *testing.T) {
	b := newBox(t, boxOpts{})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	require.Equal(t, 0, b.tick().Code)
	r := runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
	require.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	assert.Regexp(t, `(?m)^health:\s+healthy$`, r.Stdout)

	b.Stack.Bao.InvalidateTokens(b.Env)
	res := b.tick()
	require.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
	r = runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
	require.Equal(t, 1, r.Code, r.Stdout+r.Stderr)
	assert.Regexp(t, `(?m)^health:\s+not healthy$`, r.Stdout)
	assert.Regexp(t, `(?m)^problem:\s+the last run failed \(exit 1\) with UNAUTHENTICATED$`, r.Stdout)
	assert.Contains(t, r.Stdout, "next step:     "+deployd.NextStep(codes.Unauthenticated)+"\n")
	assert.Regexp(t, `(?m)^last failure:\s+UNAUTHENTICATED at 20\d\d-\S+ \(exit 1\)$`, r.Stdout)
	assert.Regexp(t, `(?m)^token:\s+present, but the last run ended UNAUTHENTICATED$`, r.Stdout)
	assert.NotRegexp(t, `(?m)^token:\s+present$`, r.Stdout)

	v := statusJSONOf(t, b, 1)
	assert.False(t, v.Healthy)
	assert.Equal(t, "refused", v.Token.State)
	require.NotNil(t, v.LastFailure)
	assert.Equal(t, codes.Unauthenticated, v.LastFailure.Code)
	assert.WithinDuration(t, time.Now(), v.LastFailure.At, time.Minute)

	b.PlaceGrant()
	require.Equal(t, 0, b.run([]string{"bootstrap", "--config", b.CfgPath}).Code, "an invalid token is no bootstrapped box")
	r = runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
	assert.Equal(t, 0, r.Code, r.Stdout)
	assert.Regexp(t, `(?m)^token:\s+present$`, r.Stdout)
	assert.Regexp(t, `(?m)^last failure:\s+UNAUTHENTICATED at `, r.Stdout, "the failure is still told")
}

// TestStatusLatchOfAnotherEnv: once env_id has changed in the config, the latch in the
// state no longer holds (the next run clears it and checks in), and status must not
// tell the operator that runs exit 78.
func TestStatusLatchOfAnotherEnv(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{noGrant: true})
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(b.foreignToken("env-dev-02")+"\n"), 0o600))
	res := b.tick()
	require.Equal(t, deployd.ExitEnvMismatch, res.Code, res.Stderr)

	b.Configure(func(c *deployd.Config) { c.EnvID = "env-dev-02" })

	r := runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.NotContains(t, r.Stdout, "runs exit 78")
	assert.Regexp(t, `(?m)^latch:\s+none \(the AGENT_ENV_MISMATCH latch of env-dev-01 clears at the next run: env_id changed\)$`, r.Stdout)
}

// TestStatusSaysWhetherBundlesAreSigned: without trusted_keys, status says bundles are
// not signed; with them, it names the trusted key ids and the replay ratchet.
func TestStatusSaysWhetherBundlesAreSigned(t *testing.T) {
	cfg := deployd.DefaultConfig()
	cfg.EnvID = "env-dev-01"
	v := buildStatus(cfg, deployd.State{}, tokenFile{state: tokenMissing}, time.Now())
	assert.False(t, v.Signatures.Required)
	assert.Empty(t, v.Signatures.Keys)
	assert.Equal(t, "not required (no trusted_keys): bundles are not signed", signaturesLine(v.Signatures))

	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	pk, err := bundle.NewPublicKey(pub)
	require.NoError(t, err)
	cfg.TrustedKeys = []string{pk.String()}
	st := deployd.State{SignedSerials: bundle.Serials{pk.ID: 7}}
	v = buildStatus(cfg, st, tokenFile{state: tokenPresent}, time.Now())
	assert.True(t, v.Signatures.Required)
	assert.Equal(t, []string{string(pk.ID)}, v.Signatures.Keys)
	assert.Equal(t, map[string]int64{string(pk.ID): 7}, v.Signatures.Serials)
	assert.Equal(t, "required, trusted keys "+string(pk.ID), signaturesLine(v.Signatures))
}
