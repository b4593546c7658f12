package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// The status view itself (its verdicts, text and JSON) is tested in deployd
// (status_test.go, goldens in deployd/testdata/status); these tests check what the
// binary adds: the exit code is the verdict's, the JSON is one object, and what the
// real runs leave behind reads as it should.

// statusJSONOf runs status --json, checks its exit code and decodes its view.
func statusJSONOf(t *testing.T, b *box, code int) deployd.Status {
	t.Helper()
	r := runMainExit(t, code, b.procEnv(), "status", "--config", b.CfgPath, "--json")
	var v deployd.Status
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &v), r.Stdout)
	assert.Equal(t, code, v.Verdict.Exit(), "the exit code is the verdict's")
	return v
}

// TestStatusOfAnUnreadableConfig: status --json prints one JSON object even when the
// config cannot be read, with the error in it, and exits 3 (unknown).
func TestStatusOfAnUnreadableConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte("env_id: env-dev-01\nnot_a_key: 1\n"), 0o600))
	r := runMainExit(t, 3, nil, "status", "--config", p, "--json")
	var v deployd.Status
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &v), "one JSON object on stdout: %q", r.Stdout)
	assert.Equal(t, deployd.VerdictUnknown, v.Verdict)
	assert.Contains(t, v.Error, "not_a_key")
	require.Len(t, v.Problems, 1)
	assert.Equal(t, codes.ConfigInvalid, v.Problems[0].Code)
	assert.NotNil(t, v.FailedSHAs)
	r = runMainExit(t, 3, nil, "status", "--config", p)
	assert.Regexp(t, `^status:\s+UNKNOWN: .*not_a_key`, r.Stdout)
}

// TestStatusAfterRevokedToken: after OpenBao (for tenancy) revoked the token, status
// does not call the token fine: it shows the last run's UNAUTHENTICATED, when, and
// the next step, and exits 2 (critical); after a bootstrap with a fresh grant it is
// healthy.
func TestStatusAfterRevokedToken(t *testing.T) {
	b := newBox(t, boxOpts{})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	require.Equal(t, 0, b.tick().Code)
	r := runMainExit(t, 0, b.procEnv(), "status", "--config", b.CfgPath)
	assert.Regexp(t, `^status:\s+OK: nothing is live; the last run ended 0\n`, r.Stdout)

	b.Stack.Bao.InvalidateTokens(b.Env)
	b.tickExit(deployd.ExitFailed)
	r = runMainExit(t, 2, b.procEnv(), "status", "--config", b.CfgPath)
	assert.Regexp(t, `^status:\s+CRITICAL: the last run ended on UNAUTHENTICATED \(exit 1\) at 20\d\d-\S+\n`, r.Stdout)
	assert.Regexp(t, `(?m)^problem:\s+\[critical\] the last run ended on UNAUTHENTICATED \(exit 1\) at `, r.Stdout)
	assert.Contains(t, r.Stdout, "next step:     "+deployd.NextStep(codes.Unauthenticated)+"\n")
	assert.Regexp(t, `(?m)^last failure:\s+UNAUTHENTICATED at 20\d\d-\S+ \(exit 1\)$`, r.Stdout)
	assert.Regexp(t, `(?m)^token:\s+present, but the last run ended UNAUTHENTICATED$`, r.Stdout)
	assert.NotRegexp(t, `(?m)^token:\s+present$`, r.Stdout)

	v := statusJSONOf(t, b, 2)
	assert.False(t, v.Healthy)
	assert.Equal(t, deployd.TokenRefused, v.Token.State)
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
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{noGrant: true})
	b.placeForeignToken()
	b.tickExit(deployd.ExitEnvMismatch)

	b.Configure(func(c *deployd.Config) { c.EnvID = "env-dev-02" })

	r := runMainExit(t, 0, b.procEnv(), "status", "--config", b.CfgPath)
	assert.NotContains(t, r.Stdout, "runs exit 78")
	assert.Regexp(t, `(?m)^latch:\s+none \(the AGENT_ENV_MISMATCH latch of env-dev-01 clears at the next run: env_id changed\)$`, r.Stdout)
}
