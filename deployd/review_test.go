package deployd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
)

// TestSealedOpenBaoSpendsNoLease: when the token upkeep of the tick already found
// OpenBao sealed, an apply exits 75 before the lease instead of spending one on a
// login that cannot succeed (the budget is 5 an hour; the timer ticks every minute).
func TestSealedOpenBaoSpendsNoLease(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	b.Stack.Bao.SetSealed(true)
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	for range 3 {
		out, code := b.tick()
		assert.Equal(t, deployd.ExitTemporary, code)
		assert.Equal(t, codes.Unavailable, out.Code)
		assert.False(t, out.Leased)
	}
	assert.Equal(t, 0, b.TenancyCalls("/v1/agent/lease"), "no lease while OpenBao is sealed")
	assert.Empty(t, b.State().Failed, "a sealed OpenBao is not a failure of the sha")

	b.Stack.Bao.SetSealed(false)
	out, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "applied", out.Result)
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"))
}

// TestFailedBootstrapKeepsTheLatch: only a bootstrap that succeeds clears the
// AGENT_ENV_MISMATCH latch; a bootstrap without a grant leaves later runs at 78
// without the network.
func TestFailedBootstrapKeepsTheLatch(t *testing.T) {
	b := newBox(t, boxOptions{})
	// The box holds a token of another env.
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(b.Stack.Token("env-dev-02")), 0o600))
	require.NoError(t, os.Remove(b.Cfg.BootstrapGrant))
	_, code := b.tick()
	require.Equal(t, deployd.ExitEnvMismatch, code)
	require.NotNil(t, b.State().EnvMismatch)

	// No grant: the bootstrap fails, and the latch stays.
	_, err := b.agent.Bootstrap(t.Context(), "")
	require.Error(t, err)
	assert.NotNil(t, b.State().EnvMismatch, "a failed bootstrap must not clear the latch")
	before, beforeBao := len(b.Stack.Requests()), len(b.Stack.BaoRequests())
	_, code = b.tick()
	assert.Equal(t, deployd.ExitEnvMismatch, code)
	assert.Len(t, b.Stack.Requests(), before, "a latched run touches no network")
	assert.Len(t, b.Stack.BaoRequests(), beforeBao)
}

// TestReportDetailIsBounded: the report's detail (and the state's copy of it) is
// bounded like the tail, and stays valid UTF-8 where it is cut.
func TestReportDetailIsBounded(t *testing.T) {
	b := newBox(t, boxOptions{})
	bn := faketenancy.SampleApp(b.Env, 1)
	var c strings.Builder
	c.WriteString("services:\n  web:\n    image: nginx:1.27\n    environment:\n")
	for i := range 400 {
		fmt.Fprintf(&c, "      V%03d: ${UNSET_VARIABLE_WITH_A_LONG_NAME_%03d}\n", i, i)
	}
	bn.Files["compose.yaml"] = c.String()
	b.Publish(bn)
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	require.Equal(t, codes.UnresolvedVars, out.Code)
	rep := b.LastReport()
	assert.LessOrEqual(t, len(rep.Detail), 4<<10, "the report's detail is bounded")
	assert.True(t, utf8.ValidString(rep.Detail))
	st := b.State()
	assert.LessOrEqual(t, len(st.LastDetail), 4<<10)
	for _, f := range st.Failed {
		assert.LessOrEqual(t, len(f.Detail), 4<<10)
	}
}

// TestResumeRedactsTheReleaseSecrets: a tick that resumes a release promoted by an
// earlier (crashed) process has read no secret from OpenBao; the values in the
// release's .env must still be redacted from the report's tail and the log.
func TestResumeRedactsTheReleaseSecrets(t *testing.T) {
	const value = "s3cr3t-db-password"
	b := newBox(t, boxOptions{})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)

	// What a kill between promote and health leaves: the live release unconfirmed.
	st := b.State()
	st.Confirmed = false
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), data, 0o600))
	b.newAgent() // a new process: its redactor knows nothing yet
	b.Docker.SetScript(&fakedockertest.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: "Error: invalid value " + value + " for DB_PASSWORD\n", Exit: 1},
	}})
	leases := b.TenancyCalls("/v1/agent/lease")
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, sha, out.SHA)
	assert.Equal(t, leases, b.TenancyCalls("/v1/agent/lease"), "a resume takes no lease")
	rep := b.LastReport()
	require.Equal(t, "APPLY_FAILED", rep.Code)
	require.Contains(t, rep.Tail, "Error: invalid value")
	assert.NotContains(t, rep.Tail, value)
	assert.NotContains(t, b.Logs.String(), value)
}

// TestDownRedactsTheReleaseSecrets: a down runs in a process that read no secret; a
// compose down that prints a value of the release's .env must not carry it into the
// report's tail.
func TestDownRedactsTheReleaseSecrets(t *testing.T) {
	const value = "s3cr3t-db-password"
	b := newBox(t, boxOptions{})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	b.newAgent()
	b.Docker.SetScript(&fakedockertest.Script{Commands: map[string]fakedocker.Command{
		"down": {Stderr: "Error: invalid value " + value + " for DB_PASSWORD\n", Exit: 1},
	}})
	b.SetDesired(faketenancy.Desired{Action: "down"})
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "failed", out.Result)
	rep := b.LastReport()
	require.Contains(t, rep.Tail, "Error: invalid value")
	assert.NotContains(t, rep.Tail, value)
	assert.NotContains(t, b.Logs.String(), value)
}

// TestRepairKeepsAReleaseCaughtMidRestage: restaging a kept release moves the old copy
// to releases/.<sha>.old before the new one is renamed into place. A crash between the
// two renames must not cost the box that release (it may be the previous one, the
// restore target): the next tick's repair puts it back.
func TestRepairKeepsAReleaseCaughtMidRestage(t *testing.T) {
	b := newBox(t, boxOptions{})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	b.Publish(faketenancy.SampleApp(b.Env, 2))
	_, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	require.Equal(t, first, b.State().PreviousSHA)

	// The crash: the kept release was moved aside, the new copy not yet in place.
	rel := b.Cfg.ReleasesDir()
	require.NoError(t, os.Rename(filepath.Join(rel, first), filepath.Join(rel, "."+first+".old")))
	require.NoError(t, os.MkdirAll(filepath.Join(rel, "."+first+".tmp"), 0o755))

	b.SetDesired(faketenancy.Desired{Action: "none"})
	_, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	_, err := os.Stat(filepath.Join(rel, first, "manifest.json"))
	assert.NoError(t, err, "the previous release is back in place")
	for _, leftover := range []string{"." + first + ".old", "." + first + ".tmp"} {
		_, err := os.Stat(filepath.Join(rel, leftover))
		assert.True(t, os.IsNotExist(err), "%s removed", leftover)
	}
}

// TestExplicitRollbackAfterARollbackRefusal: a sha refused with ROLLBACK (no
// rollback flag) is applied when tenancy then asks for it with rollback: true, the
// remedy docs/OPERATIONS.md names ("roll back explicitly from the console, which sets
// rollback"); the refusal was about the missing flag, not about the sha.
func TestExplicitRollbackAfterARollbackRefusal(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.Publish(faketenancy.SampleApp(b.Env, 5))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	older := b.Publish(faketenancy.SampleApp(b.Env, 3))
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	require.Equal(t, codes.Rollback, out.Code)

	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: older, Rollback: true})
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, out.Code)
	assert.Equal(t, "applied", out.Result)
	assert.Equal(t, older, b.Live())

	// Without the flag, another refused sha stays remembered (no retry, no download).
	newer := b.Publish(faketenancy.SampleApp(b.Env, 2))
	_, code = b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	downloads := b.TenancyCalls("/v1/agent/bundles/")
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: newer})
	out, code = b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Rollback, out.Code)
	assert.Equal(t, downloads, b.TenancyCalls("/v1/agent/bundles/"), "a remembered failure is re-reported without a download")
}
