package deployd_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// statusAt is the fixed time the status goldens are taken at.
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

// freeSpace is what of a status depends on the machine: the state dir's free space.
var freeSpace = regexp.MustCompile(`"free_kib": \d+|writable, [0-9.]+ MiB free`)

// statusGolden takes the status of b at statusAt, checks its verdict, and compares its
// text and JSON with the goldens status/name.txt and .json (the box's directory
// written /BOX, the free space written N).
func statusGolden(t *testing.T, b *box, name string, verdict deployd.Verdict) deployd.Status {
	t.Helper()
	v := deployd.ReadStatus(b.Cfg, deployd.StatusOptions{Now: statusAt})
	assert.Equal(t, verdict, v.Verdict, "%+v", v.Problems)
	normal := func(s string) []byte {
		s = strings.ReplaceAll(s, b.Dir, "/BOX")
		return []byte(freeSpace.ReplaceAllStringFunc(s, func(m string) string {
			if strings.HasPrefix(m, `"free_kib"`) {
				return `"free_kib": N`
			}
			return "writable, N MiB free"
		}))
	}
	golden.Assert(t, "status/"+name+".txt", normal(v.Text()))
	data, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	golden.Assert(t, "status/"+name+".json", normal(string(data)+"\n"))
	assert.Equal(t, deployd.StatusSchema, v.Schema)
	assert.Equal(t, verdict == deployd.VerdictOK, v.Healthy)
	assert.NotNil(t, v.Problems, "problems is always a list")
	assert.NotNil(t, v.FailedSHAs, "failed_shas is always a list")
	assert.True(t, strings.HasPrefix(v.Text(), "status:        "+v.Headline+"\n"), "the verdict is the first line")
	return v
}

// TestStatusView: the text and the versioned JSON of the status for the states an
// operator meets, with their verdicts: ok (0), warning (1), critical (2), unknown (3).
// The goldens hold the whole view: its problems (code, level, next step), token,
// condition, latch, last run, failure and restore, and the evidence of a failed sha.
func TestStatusView(t *testing.T) {
	t.Parallel()
	sha, bad := strings.Repeat("a", 64), strings.Repeat("c", 64)
	tokenExpires := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	applied := deployd.State{
		LiveSHA: sha, LiveSerial: 4, Confirmed: true,
		LastCheckin: statusAt, LastAction: "none", LastResult: "applied", LastSHA: sha,
		LastTick: statusAt, LastExit: 0, TokenExpires: tokenExpires,
	}
	// condition is a streak of runs that ended on code with exit, the first at since.
	condition := func(code codes.Code, exit int, since time.Time, runs int) *deployd.Condition {
		return &deployd.Condition{Code: code, Exit: exit, Since: since, CodeSince: since, Last: statusAt.Add(-time.Minute), Runs: runs}
	}
	// A box with a token and the state applied changed by edit.
	for _, tc := range []struct {
		golden  string
		verdict deployd.Verdict
		edit    func(b *box, st *deployd.State)
	}{
		// An old failure is told, but the box is healthy again.
		{"healthy", deployd.VerdictOK, func(b *box, st *deployd.State) {
			st.LastFailure = &deployd.RunFailure{At: statusAt.Add(-time.Hour), Exit: 1, Code: codes.Unauthenticated}
			st.Failed = map[string]deployd.Failure{strings.Repeat("b", 64): {Serial: 3, Code: codes.Privileged, Detail: "service web: privileged", At: statusAt.Add(-2 * time.Hour)}}
			st.Live = &deployd.LiveHealth{SHA: sha, ObservedAt: statusAt, Healthy: true, Services: []deployd.LiveService{
				{LiveService: tenancy.LiveService{Name: "migrate", State: "exited"}, Ready: true},
				{LiveService: tenancy.LiveService{Name: "web", State: "running", Health: "healthy", Restarts: 1}, Ready: true},
			}}
			st.LastReclaim = &deployd.Reclaim{At: statusAt.Add(-30 * time.Minute), Images: 2, Bytes: 3 << 20}
		}},
		// A token the last run was refused with is not fine.
		{"unauthenticated", deployd.VerdictCritical, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(-time.Minute), 1
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 1, Code: codes.Unauthenticated}
			st.Condition = condition(codes.Unauthenticated, 1, st.LastTick, 1)
		}},
		// A failed apply, with its health evidence; the next step points at status,
		// as the evidence is on the box, not in the restored containers' logs.
		{"failed-apply", deployd.VerdictCritical, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(-time.Minute), 1
			st.LastResult, st.LastCode, st.LastSHA = "failed", codes.Unhealthy, bad
			st.LastDetail = "service web: unhealthy; restore: restored-healthy aaaaaaaaaaaa"
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 1, Code: codes.Unhealthy}
			st.LastRestore = &deployd.Restore{Result: deployd.RestoreHealthy, SHA: sha, At: st.LastTick}
			st.Failed = map[string]deployd.Failure{bad: {Serial: 5, Code: codes.Unhealthy, Detail: "service web: unhealthy", At: st.LastTick,
				Evidence: "== web: running, health unhealthy\nhealthcheck 08:59:50 exit 1: curl: (7) Failed to connect to localhost port 8080\n-- logs:\npanic: no DATABASE_URL"}}
			st.Condition = condition(codes.Unhealthy, 1, st.LastTick, 1)
			st.Condition.SHA = bad
		}},
		// The latch and the run that set it are one problem.
		{"latched", deployd.VerdictCritical, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(-time.Minute), 78
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 78, Code: codes.AgentEnvMismatch}
			st.Condition = condition(codes.AgentEnvMismatch, 78, st.LastTick, 1)
			st.EnvMismatch = &deployd.Latch{EnvID: b.Env, At: st.LastTick, Message: "token is for env-dev-02"}
		}},
		// A young 75 the next ticks may mend, with the time the box tries again.
		{"temporary", deployd.VerdictWarning, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(-time.Minute), 75
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 75, Code: codes.RateLimited}
			st.Condition = condition(codes.RateLimited, 75, statusAt.Add(-10*time.Minute), 10)
			st.Condition.NextAttempt = statusAt.Add(30 * time.Minute)
		}},
		// A 75 lasting an hour.
		{"lasting", deployd.VerdictCritical, func(b *box, st *deployd.State) {
			st.LastTick, st.LastExit = statusAt.Add(-time.Minute), 75
			st.LastFailure = &deployd.RunFailure{At: st.LastTick, Exit: 75, Code: codes.Unavailable}
			st.Condition = condition(codes.Unavailable, 75, statusAt.Add(-deployd.LastingAfter-time.Minute), 62)
		}},
		// The live release restarts.
		{"live-unhealthy", deployd.VerdictCritical, func(b *box, st *deployd.State) {
			st.Live = &deployd.LiveHealth{SHA: sha, ObservedAt: statusAt, Healthy: false, Services: []deployd.LiveService{
				{LiveService: tenancy.LiveService{Name: "web", State: "restarting", Restarts: 4}},
			}}
		}},
		// No run for an hour.
		{"stale", deployd.VerdictWarning, func(b *box, st *deployd.State) {
			st.LastTick, st.NextCheckin = statusAt.Add(-time.Hour), time.Minute
		}},
		{"expired", deployd.VerdictCritical, func(b *box, st *deployd.State) {
			st.TokenExpires = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			b := newBox(t, boxOptions{})
			require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
			require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte("hvs.status-golden-token-0123456789\n"), 0o600))
			st := applied
			tc.edit(b, &st)
			writeState(t, b, st)
			statusGolden(t, b, tc.golden, tc.verdict)
		})
	}

	t.Run("fresh box", func(t *testing.T) {
		statusGolden(t, newBox(t, boxOptions{}), "missing", deployd.VerdictCritical)
	})

	t.Run("corrupt token", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		writeState(t, b, applied)
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 64), 0o600))
		statusGolden(t, b, "corrupt-token", deployd.VerdictCritical)
	})

	t.Run("a state that cannot be read", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, syscall.Mkfifo(b.Cfg.StatePath(), 0o600))
		v := statusGolden(t, b, "unreadable", deployd.VerdictUnknown)
		assert.Equal(t, 3, v.Verdict.Exit())
	})
}

// TestStatusListsFailedSHAsNewestFirst: status prints the failed shas newest first
// (by the time they failed; equal times by sha), never in map order.
func TestStatusListsFailedSHAsNewestFirst(t *testing.T) {
	b := newBox(t, boxOptions{})
	st := deployd.State{Failed: map[string]deployd.Failure{}, LastTick: statusAt}
	var want []string
	for i := range 8 {
		sha := strings.Repeat(fmt.Sprintf("%x", 15-i), 64)
		// i 6 and 7 failed at the same time: by sha, "8…" before "9…".
		when := statusAt.Add(-time.Duration(min(i, 6)) * time.Minute)
		st.Failed[sha] = deployd.Failure{Serial: int64(i + 1), Code: "PRIVILEGED", At: when}
		want = append(want, fmt.Sprintf("failed sha:    %s serial %d PRIVILEGED", sha, i+1))
	}
	want[6], want[7] = want[7], want[6]
	writeState(t, b, st)
	for range 5 { // map order differs between runs
		var got []string
		for _, line := range strings.Split(deployd.ReadStatus(b.Cfg, deployd.StatusOptions{Now: statusAt}).Text(), "\n") {
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
	b := newBox(t, boxOptions{})
	sha := strings.Repeat("a", 64)
	writeState(t, b, deployd.State{LiveSHA: sha, LiveSerial: 3, Confirmed: true, LastTick: statusAt, Live: &deployd.LiveHealth{
		SHA: sha, ObservedAt: statusAt, Healthy: false,
		Services: []deployd.LiveService{
			{LiveService: tenancy.LiveService{Name: "web\x1b[2J", State: "exited", ExitCode: 137, Restarts: 2}},
		},
	}})
	out := deployd.ReadStatus(b.Cfg, deployd.StatusOptions{Now: statusAt}).Text()
	assert.Contains(t, out, "live health:   UNHEALTHY at 2026-12-01T09:00:00Z")
	assert.Contains(t, out, "web?[2J:")
	assert.Contains(t, out, "exited, exit code 137, 2 restarts")
	assert.NotContains(t, out, "\x1b")
}

// TestStatusSaysWhetherBundlesAreSigned: without trusted_keys, status says bundles are
// not signed; with them, it names the trusted key ids and the replay ratchet.
func TestStatusSaysWhetherBundlesAreSigned(t *testing.T) {
	b := newBox(t, boxOptions{})
	v := deployd.ReadStatus(b.Cfg, deployd.StatusOptions{Now: statusAt})
	assert.False(t, v.Signatures.Required)
	assert.Empty(t, v.Signatures.Keys)
	assert.Contains(t, v.Text(), "signatures:    not required (no trusted_keys): bundles are not signed\n")

	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	pk, err := bundle.NewPublicKey(pub)
	require.NoError(t, err)
	b.Configure(func(c *deployd.Config) { c.TrustedKeys = []string{pk.String()} })
	writeState(t, b, deployd.State{SignedSerials: bundle.Serials{pk.ID: 7}})
	v = deployd.ReadStatus(b.Cfg, deployd.StatusOptions{Now: statusAt})
	assert.True(t, v.Signatures.Required)
	assert.Equal(t, []string{string(pk.ID)}, v.Signatures.Keys)
	assert.Equal(t, map[string]int64{string(pk.ID): 7}, v.Signatures.Serials)
	assert.Contains(t, v.Text(), "signatures:    required, trusted keys "+string(pk.ID)+"\n")
}
