package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// The tests of issue 28's "Done when" ("One truth about a box"), one per bullet, each
// through the real binary against the shipped fakes: what a box says of itself —
// `status`, the metrics file and the check-in — is one truth. An hour passing is a
// state aged on disk: the shipped binary has no clock to set.

// truthBox is a box whose runs write a metrics file.
type truthBox struct {
	*box
	t *testing.T
	// metrics is the metrics file every tickM writes, outside the state dir (a state
	// dir that cannot be written must not take it along).
	metrics string
}

// newTruthBox is newBox (on fastScript unless o names a script) with a metrics file.
func newTruthBox(t *testing.T, o boxOpts) *truthBox {
	t.Helper()
	testprog.SkipIfShort(t)
	if o.script == nil {
		o.script = fastScript(nil)
	}
	b := newBox(t, o)
	return &truthBox{box: b, t: t, metrics: filepath.Join(b.Dir, "monky_deployd.prom")}
}

// tickM runs a tick (`run --metrics-file`).
func (b *truthBox) tickM() result {
	b.t.Helper()
	return b.tick("--metrics-file", b.metrics)
}

// tickMExit is tickM, which must exit with code.
func (b *truthBox) tickMExit(code int) result {
	b.t.Helper()
	return b.tickExit(code, "--metrics-file", b.metrics)
}

// apply publishes the sample app at serial, runs a tick that must apply it and
// returns its sha.
func (b *truthBox) apply(serial int64) string {
	b.t.Helper()
	sha := b.Publish(faketenancy.SampleApp(b.Env, serial))
	b.tickMExit(0)
	require.Equal(b.t, sha, b.Live())
	return sha
}

// statusJSON runs `monky-deployd status --json`: it must print one JSON object, and
// exit with its verdict's code.
func (b *truthBox) statusJSON() (deployd.Status, string) {
	b.t.Helper()
	res := b.run([]string{"status", "--config", b.CfgPath, "--json"})
	dec := json.NewDecoder(strings.NewReader(res.Stdout))
	var v deployd.Status
	require.NoError(b.t, dec.Decode(&v), "status --json prints a JSON object:\n%s", res.Output())
	require.False(b.t, dec.More(), "status --json prints one JSON object:\n%s", res.Stdout)
	require.Equal(b.t, v.Verdict.Exit(), res.Code, "status exits with its verdict's code:\n%s", res.Output())
	return v, res.Stdout
}

// status runs `status --json` (statusJSON) and `status`, which exits as the JSON's
// verdict does. The verdict must be want and the first problem's code problem, unless
// they are "". It returns the view, the JSON and the text.
func (b *truthBox) status(want deployd.Verdict, problem codes.Code) (deployd.Status, string, string) {
	b.t.Helper()
	v, out := b.statusJSON()
	if want != "" {
		assert.Equal(b.t, want, v.Verdict, "%+v", v.Problems)
	}
	if problem != "" {
		require.NotEmpty(b.t, v.Problems)
		assert.Equal(b.t, problem, v.Problems[0].Code)
	}
	res := b.run([]string{"status", "--config", b.CfgPath})
	assert.Equal(b.t, v.Verdict.Exit(), res.Code, "status exits as status --json:\n%s", res.Stdout)
	return v, out, res.Stdout
}

// editState changes state.json on disk, as time passing would have: the shipped
// binary has no clock to set.
func (b *truthBox) editState(edit func(*deployd.State)) {
	b.t.Helper()
	st := b.State()
	edit(&st)
	data, err := json.MarshalIndent(st, "", "  ")
	require.NoError(b.t, err)
	require.NoError(b.t, os.WriteFile(b.Cfg.StatePath(), append(data, '\n'), 0o600))
}

// series is the label set and the value of the one series of the metric name in the
// metrics file.
func (b *truthBox) series(name string) (string, float64) {
	b.t.Helper()
	return labelsOf(b.t, b.metrics, name), parseMetrics(b.t, b.metrics)[name]
}

// assertVerdictMetric checks monky_deployd_status: the verdict as its label, its
// exit code as the value.
func (b *truthBox) assertVerdictMetric(v deployd.Verdict) {
	b.t.Helper()
	labels, value := b.series("monky_deployd_status")
	assert.Equal(b.t, `{verdict="`+string(v)+`"}`, labels)
	assert.InDelta(b.t, float64(v.Exit()), value, 0)
}

// assertConditionMetrics checks the condition's series in the metrics file against
// the condition in the state (nil: none).
func (b *truthBox) assertConditionMetrics(c *deployd.Condition) {
	b.t.Helper()
	labels, held := b.series("monky_deployd_condition")
	m := parseMetrics(b.t, b.metrics)
	if c == nil {
		assert.Equal(b.t, `{code="",exit=""}`, labels)
		assert.Zero(b.t, held)
		assert.Zero(b.t, m["monky_deployd_condition_runs"])
		assert.Zero(b.t, m["monky_deployd_condition_since_timestamp_seconds"])
		assert.Zero(b.t, m["monky_deployd_next_attempt_timestamp_seconds"])
		return
	}
	assert.Equal(b.t, `{code="`+string(c.Code)+`",exit="`+strconv.Itoa(c.Exit)+`"}`, labels)
	assert.InDelta(b.t, 1, held, 0)
	assert.InDelta(b.t, float64(c.Runs), m["monky_deployd_condition_runs"], 0)
	assert.InDelta(b.t, unixMilli(c.Since), m["monky_deployd_condition_since_timestamp_seconds"], 0.0011)
	assert.InDelta(b.t, unixMilli(c.NextAttempt), m["monky_deployd_next_attempt_timestamp_seconds"], 0.0011)
}

// unixMilli is t as the metrics file writes it; 0 for the zero time.
func unixMilli(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli()) / 1000
}

// assertCheckinCondition checks that the check-in carried c (the condition the run
// before it left), as the wire carries it: times to the second.
func assertCheckinCondition(t *testing.T, c *deployd.Condition, got *faketenancy.Condition, what string) {
	t.Helper()
	if c == nil {
		assert.Nil(t, got, "%s: no condition", what)
		return
	}
	require.NotNil(t, got, "%s: the check-in carries the condition", what)
	assert.Equal(t, string(c.Code), got.Code, what)
	assert.Equal(t, c.Exit, got.Exit, what)
	assert.Equal(t, c.Runs, got.Runs, what)
	assert.Equal(t, c.SHA, got.SHA, what)
	assert.True(t, c.Since.Truncate(time.Second).Equal(got.Since), "%s: since %s, the state says %s", what, got.Since, c.Since)
	assert.True(t, c.NextAttempt.Truncate(time.Second).Equal(got.NextAttempt), "%s: next attempt %s, the state says %s", what, got.NextAttempt, c.NextAttempt)
}

// assertPairing checks what each check-in says of the last report: last_result in
// its vocabulary (applied, failed, down; "" before any), last_code with it: a code
// with failed, none otherwise. A run that reported nothing changes neither.
func assertPairing(t *testing.T, cs []faketenancy.CheckinRequest) {
	t.Helper()
	for i, c := range cs {
		switch c.LastResult {
		case "", "applied", "down":
			assert.Empty(t, c.LastCode, "check-in %d: last_result %q pairs with no code", i, c.LastResult)
		case "failed":
			assert.NotEmpty(t, c.LastCode, "check-in %d: last_result failed pairs with a code", i)
		default:
			assert.Fail(t, "last_result out of its vocabulary", "check-in %d: %q", i, c.LastResult)
		}
	}
}

// checkinProxy is a proxy in front of tenancy that answers every check-in with body
// (status 200): the fake tenancy still receives and records the check-in.
func checkinProxy(t *testing.T, target, body string) string {
	t.Helper()
	return proxyWith(t, target, func(resp *http.Response) error {
		if resp.Request.URL.Path != "/v1/agent/checkin" || resp.StatusCode != http.StatusOK {
			return nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}, nil)
}

// corruptState leaves state.json as a write cut in half would: it reads, but does
// not parse.
func corruptState(t *testing.T, b *box) {
	t.Helper()
	data := readFile(t, b.Cfg.StatePath())
	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), data[:len(data)/2], 0o600))
}

// TestTruthLastingOpenBaoOutage: OpenBao sealed for several ticks while an apply is
// published. Every tick exits 75 without a lease; the state counts the runs of the
// condition (UNAVAILABLE) from a since that does not move; status, the metrics file
// and the check-ins all tell it, warning first, critical once it has lasted; the
// check-ins' last_result keeps its vocabulary. OpenBao back, the next tick applies
// with one lease and the condition is gone everywhere.
func TestTruthLastingOpenBaoOutage(t *testing.T) {
	b := newTruthBox(t, boxOpts{})
	b.apply(1)
	second := b.Publish(faketenancy.SampleApp(b.Env, 2))
	b.Stack.Bao.SetSealed(true)
	leases := b.Leases()
	first := len(b.Stack.Tenancy.Checkins(b.Env)) // the check-in of the first tick of the outage

	var since time.Time
	for run := 1; run <= 3; run++ {
		res := b.tickMExit(deployd.ExitTemporary)
		assert.Equal(t, string(codes.Unavailable), tickCode(t, res.Stderr))
		assert.Equal(t, leases, b.Leases(), "run %d: no lease while OpenBao is sealed", run)
		c := b.State().Condition
		require.NotNil(t, c, "run %d", run)
		assert.Equal(t, codes.Unavailable, c.Code)
		assert.Equal(t, deployd.ExitTemporary, c.Exit)
		assert.Equal(t, run, c.Runs)
		assert.Equal(t, second, c.SHA)
		if run == 1 {
			since = c.Since
		}
		assert.True(t, since.Equal(c.Since), "run %d: since does not move (%s, then %s)", run, since, c.Since)
		b.assertConditionMetrics(c)
		b.assertVerdictMetric(deployd.VerdictWarning)
		assert.InDelta(t, 75, parseMetrics(t, b.metrics)["monky_deployd_exit_code"], 0)
	}

	v, _, text := b.status(deployd.VerdictWarning, codes.Unavailable) // a young 75 is a warning
	require.NotNil(t, v.Condition)
	assert.Equal(t, codes.Unavailable, v.Condition.Code)
	assert.Equal(t, 3, v.Condition.Runs)
	assert.True(t, since.Equal(v.Condition.Since))
	assert.Regexp(t, `^status:\s+WARNING: the last 3 runs ended on UNAVAILABLE \(exit 75\) since 20\d\d-`, text)
	assert.Regexp(t, `(?m)^condition:\s+UNAVAILABLE \(exit 75\) since \S+, 3 runs; sha `+second+`$`, text)

	// An hour passes: the condition began more than LastingAfter ago.
	b.editState(func(st *deployd.State) {
		st.Condition.Since = st.Condition.Since.Add(-deployd.LastingAfter - time.Minute)
		st.Condition.CodeSince = st.Condition.Since
	})
	aged := b.State().Condition
	_, _, text = b.status(deployd.VerdictCritical, "") // a 75 that lasts is critical
	assert.Regexp(t, `^status:\s+CRITICAL: the last 3 runs ended on UNAVAILABLE \(exit 75\)`, text)

	b.tickMExit(deployd.ExitTemporary)
	c := b.State().Condition
	require.NotNil(t, c)
	assert.Equal(t, 4, c.Runs)
	assert.True(t, aged.Since.Equal(c.Since), "since stays where it was")
	b.assertConditionMetrics(c)
	b.assertVerdictMetric(deployd.VerdictCritical)
	lasting := *c

	// The check-ins: the first of the outage carries none (the run before it ended 0),
	// each later one the condition the run before it left.
	cs := b.Stack.Tenancy.Checkins(b.Env)
	require.Len(t, cs, first+4)
	assert.Nil(t, cs[first].Condition)
	for i := 1; i <= 3; i++ {
		got := cs[first+i].Condition
		require.NotNil(t, got, "check-in %d of the outage", i+1)
		assert.Equal(t, string(codes.Unavailable), got.Code)
		assert.Equal(t, deployd.ExitTemporary, got.Exit)
		assert.Equal(t, i, got.Runs)
		assert.Equal(t, second, got.SHA)
	}
	assert.True(t, since.Truncate(time.Second).Equal(cs[first+1].Condition.Since))
	assert.True(t, aged.Since.Truncate(time.Second).Equal(cs[first+3].Condition.Since), "the check-in tells the since the state holds")
	for _, ci := range cs[first:] {
		assert.Equal(t, "applied", ci.LastResult, "nothing was reported during the outage: the last report stands")
		assert.Empty(t, ci.LastCode)
	}

	// OpenBao is back: the next tick applies with one lease; the condition is gone.
	b.Stack.Bao.SetSealed(false)
	b.tickMExit(0)
	assert.Equal(t, second, b.Live())
	assert.Equal(t, leases+1, b.Leases())
	assert.Nil(t, b.State().Condition)
	assertCheckinCondition(t, &lasting, b.Stack.Tenancy.Checkins(b.Env)[first+4].Condition, "the check-in of the tick that recovered")
	v, _ = b.statusJSON()
	assert.Equal(t, deployd.VerdictOK, v.Verdict, "%+v", v.Problems)
	assert.Nil(t, v.Condition)
	b.assertConditionMetrics(nil)
	b.assertVerdictMetric(deployd.VerdictOK)
	b.tickMExit(0)
	_, carried := b.Stack.Tenancy.LastCondition(b.Env)
	assert.False(t, carried, "the check-in after a run that ended 0 carries no condition")
	assertPairing(t, b.Stack.Tenancy.Checkins(b.Env))
}

// TestTruthLastingRateLimit: the lease budget spent, tenancy answers 429 with a
// Retry-After of about 59 minutes. Under the timer (a process per tick) the next
// ticks check in (the heartbeat) but neither download the bundle nor ask for a lease
// before it has passed, and exit 75; status, the metrics file and the check-in name
// RATE_LIMITED and the next attempt. Once it has passed, the next tick downloads and
// leases.
func TestTruthLastingRateLimit(t *testing.T) {
	b := newTruthBox(t, boxOpts{})
	b.apply(1)
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{LeaseBudget: 1}) // spent by the apply
	second := b.Publish(faketenancy.SampleApp(b.Env, 2))

	res := b.tickMExit(deployd.ExitTemporary)
	assert.Equal(t, string(codes.RateLimited), tickCode(t, res.Stderr))
	assert.Equal(t, 1, b.downloads(second))
	assert.Equal(t, 2, b.TenancyCalls("/v1/agent/lease"), "the apply's lease, then the one refused")
	assert.Equal(t, 1, b.Leases())
	c := b.State().Condition
	require.NotNil(t, c)
	assert.Equal(t, codes.RateLimited, c.Code)
	next := c.NextAttempt
	assert.WithinRange(t, next, time.Now().Add(55*time.Minute), time.Now().Add(61*time.Minute), "tenancy's Retry-After, about 59 minutes")

	for run := 2; run <= 3; run++ {
		checkins := len(b.Stack.Tenancy.Checkins(b.Env))
		res = b.tickMExit(deployd.ExitTemporary)
		assert.Equal(t, string(codes.RateLimited), tickCode(t, res.Stderr))
		assert.Contains(t, res.Stderr, "tenancy asked the box to wait; checked in, but neither downloading the bundle nor asking for a lease before then")
		assert.Len(t, b.Stack.Tenancy.Checkins(b.Env), checkins+1, "run %d checks in: the heartbeat", run)
		assert.Equal(t, 1, b.downloads(second), "run %d downloads nothing before the Retry-After", run)
		assert.Equal(t, 2, b.TenancyCalls("/v1/agent/lease"), "run %d asks for no lease before the Retry-After", run)
		c = b.State().Condition
		require.NotNil(t, c)
		assert.Equal(t, run, c.Runs)
		assert.True(t, next.Equal(c.NextAttempt), "the next attempt stays tenancy's")
		b.assertConditionMetrics(c)
		b.assertVerdictMetric(deployd.VerdictWarning)
	}
	got, ok := b.Stack.Tenancy.LastCondition(b.Env)
	require.True(t, ok)
	assert.Equal(t, string(codes.RateLimited), got.Code)
	assert.Equal(t, 2, got.Runs)
	assert.True(t, next.Truncate(time.Second).Equal(got.NextAttempt), "the check-in names the next attempt: %s", got.NextAttempt)

	v, _, text := b.status(deployd.VerdictWarning, "")
	require.NotNil(t, v.Condition)
	assert.Equal(t, codes.RateLimited, v.Condition.Code)
	require.NotNil(t, v.Condition.NextAttempt)
	assert.True(t, next.Equal(*v.Condition.NextAttempt))
	when := next.UTC().Format(time.RFC3339)
	assert.Regexp(t, `^status:\s+WARNING: the last 3 runs ended on RATE_LIMITED \(exit 75\) since \S+; the box tries again by itself at `+when, text)
	assert.Regexp(t, `(?m)^condition:\s+RATE_LIMITED \(exit 75\) since \S+, 3 runs; sha `+second+`; next attempt `+when+`$`, text)
	assertPairing(t, b.Stack.Tenancy.Checkins(b.Env))

	// The hour passes: the recorded next attempt is behind, and the budget refilled.
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
	b.editState(func(st *deployd.State) { st.Condition.NextAttempt = time.Now().Add(-time.Minute) })
	b.tickMExit(0)
	assert.Equal(t, 2, b.downloads(second))
	assert.Equal(t, 3, b.TenancyCalls("/v1/agent/lease"))
	assert.Equal(t, 2, b.Leases())
	assert.Equal(t, second, b.Live())
	assert.Nil(t, b.State().Condition)
	b.assertConditionMetrics(nil)
}

// missingSecretApp is the sample app at serial whose web service reads API_TOKEN too,
// from the secret "api" (key "token"), which OpenBao does not hold yet.
func missingSecretApp(env string, serial int64) faketenancy.BundleSpec {
	spec := faketenancy.SampleApp(env, serial)
	spec.Secrets["API_TOKEN"] = faketenancy.SecretRef{Path: "api", Key: "token"}
	spec.Files["compose.yaml"] = strings.Replace(spec.Files["compose.yaml"], "      DB_PASSWORD: ${DB_PASSWORD}\n",
		"      DB_PASSWORD: ${DB_PASSWORD}\n      API_TOKEN: ${API_TOKEN}\n", 1)
	return spec
}

// TestTruthSecretWrittenAfterAFailure: a missing secret heals by itself. Missing
// before the lease: refused with SECRET_MISSING, reported, no lease; the sha is held
// an hour (later ticks re-report, no download, no lease), and status names the next
// attempt; once the secret is written and the hour has passed, the next tick applies
// with exactly one lease and no retry from tenancy. Gone between the check before the
// lease and the read after it: one lease spent, and none more in that hour.
func TestTruthSecretWrittenAfterAFailure(t *testing.T) {
	testprog.SkipIfShort(t)
	t.Run("missing before the lease", func(t *testing.T) {
		b := newTruthBox(t, boxOpts{})
		b.apply(1)
		sha := b.Publish(missingSecretApp(b.Env, 2))
		leases := b.Leases()

		res := b.tickMExit(deployd.ExitFailed)
		assert.Equal(t, string(codes.SecretMissing), tickCode(t, res.Stderr))
		assert.Contains(t, res.Stderr, "a secret the bundle names does not exist in OpenBao; no lease taken")
		assert.Equal(t, leases, b.Leases(), "a missing secret costs no lease")
		rep := b.LastReport()
		assert.Equal(t, "failed", rep.Result)
		assert.Equal(t, string(codes.SecretMissing), rep.Code)
		assert.Equal(t, sha, rep.SHA)
		st := b.State()
		f, held := st.Failed[sha]
		require.True(t, held, "the sha is held")
		assert.Equal(t, codes.SecretMissing, f.Code)
		assert.WithinRange(t, f.Until, time.Now().Add(59*time.Minute), time.Now().Add(61*time.Minute), "held an hour")
		require.NotNil(t, st.Condition)
		assert.True(t, f.Until.Equal(st.Condition.NextAttempt), "the condition names the end of the hold")

		// The next ticks of the hour re-report it: no download, no lease.
		gets, reports := b.downloads(sha), len(b.Stack.Tenancy.Reports(b.Env))
		res = b.tickMExit(deployd.ExitFailed)
		assert.Contains(t, res.Stderr, "this sha failed on this box and is held until its next attempt")
		assert.Equal(t, gets, b.downloads(sha))
		assert.Equal(t, leases, b.Leases())
		require.Len(t, b.Stack.Tenancy.Reports(b.Env), reports+1)
		assert.Equal(t, string(codes.SecretMissing), b.LastReport().Code)
		c := b.State().Condition
		require.NotNil(t, c)
		assert.True(t, f.Until.Equal(c.NextAttempt))
		b.assertConditionMetrics(c)
		b.assertVerdictMetric(deployd.VerdictCritical)
		got, ok := b.Stack.Tenancy.LastCondition(b.Env)
		require.True(t, ok)
		assert.Equal(t, string(codes.SecretMissing), got.Code)
		assert.True(t, f.Until.Truncate(time.Second).Equal(got.NextAttempt), "the check-in names the next attempt")

		v, _, text := b.status("", "")
		require.NotNil(t, v.Condition)
		require.NotNil(t, v.Condition.NextAttempt, "status names the next attempt")
		assert.True(t, f.Until.Equal(*v.Condition.NextAttempt))
		require.NotEmpty(t, v.FailedSHAs)
		require.NotNil(t, v.FailedSHAs[0].Until)
		assert.True(t, f.Until.Equal(*v.FailedSHAs[0].Until))
		when := f.Until.UTC().Format(time.RFC3339)
		assert.Contains(t, text, "the box tries again by itself at "+when)
		assert.Regexp(t, `(?m)^failed sha:\s+`+sha+` serial 2 SECRET_MISSING \(tried again at `+when+`\)$`, text)

		// The secret is written; within the hour the sha stays held.
		b.Stack.Bao.PutSecret(b.Env, "api", map[string]string{"token": "api-token-written-later"})
		b.tickMExit(deployd.ExitFailed)
		assert.Equal(t, leases, b.Leases())

		// The hour passes: the next tick applies, with one lease. Tenancy asks as it
		// did since the publish (apply, no retry): no console action.
		b.editState(func(st *deployd.State) {
			f := st.Failed[sha]
			f.Until = time.Now().Add(-time.Minute)
			st.Failed[sha] = f
			st.Condition.NextAttempt = f.Until
		})
		b.tickMExit(0)
		assert.Equal(t, sha, b.Live())
		assert.Equal(t, leases+1, b.Leases(), "exactly one lease")
		assert.Equal(t, "applied", b.LastReport().Result)
		assert.NotContains(t, b.State().Failed, sha)
		assert.Nil(t, b.State().Condition)
		assert.Contains(t, string(readFile(t, filepath.Join(b.Cfg.CurrentLink(), ".env"))), "API_TOKEN='api-token-written-later'\n")
	})

	t.Run("gone between the check and the read after the lease", func(t *testing.T) {
		b := newTruthBox(t, boxOpts{})
		live := b.apply(1)
		// OpenBao deletes the secret right after the login with the lease's grant: the
		// check before the lease found it, the read after the lease does not.
		var armed atomic.Bool
		baoURL := proxyWith(t, b.Stack.Bao.URL(), func(resp *http.Response) error {
			if strings.HasSuffix(resp.Request.URL.Path, "/login") && resp.StatusCode == http.StatusOK && armed.CompareAndSwap(true, false) {
				b.Stack.Bao.DeleteSecret(b.Env, "db")
			}
			return nil
		}, nil)
		b.Configure(func(c *deployd.Config) { c.Bao.Addr = baoURL })
		sha := b.Publish(faketenancy.SampleApp(b.Env, 2))
		leases := b.Leases()
		secretPath := "/v1/secret/data/envs/" + b.Env + "/db"
		reads := len(secretReads(b, secretPath))
		armed.Store(true)

		res := b.tickMExit(deployd.ExitFailed)
		assert.Equal(t, string(codes.SecretMissing), tickCode(t, res.Stderr))
		assert.Equal(t, []int{http.StatusOK, http.StatusNotFound}, secretReads(b, secretPath)[reads:], "found before the lease, gone after it")
		assert.Equal(t, leases+1, b.Leases(), "one lease spent")
		assert.Equal(t, live, b.Live(), "nothing was promoted")
		assert.Equal(t, string(codes.SecretMissing), b.LastReport().Code)
		f, held := b.State().Failed[sha]
		require.True(t, held)
		assert.WithinRange(t, f.Until, time.Now().Add(59*time.Minute), time.Now().Add(61*time.Minute), "held an hour")

		// The next ticks of the hour take no lease, the secret written again or not.
		b.Stack.Bao.PutSecret(b.Env, "db", map[string]string{"password": testbox.DefaultSecret})
		for range 2 {
			res = b.tickMExit(deployd.ExitFailed)
			assert.Equal(t, string(codes.SecretMissing), tickCode(t, res.Stderr))
			assert.Equal(t, leases+1, b.Leases(), "no lease more within the hour")
		}
	})
}

// secretReads is the status of every read of the secret at path the fake OpenBao
// answered, in order.
func secretReads(b *truthBox, path string) []int {
	var out []int
	for _, r := range b.Stack.Bao.Requests() {
		if r.Method == http.MethodGet && r.Path == path {
			out = append(out, r.Status)
		}
	}
	return out
}

// TestTruthCodesThatDoNotLie: a malformed check-in answer is TENANCY_PROTOCOL (exit
// 75, nothing reported), never APPLY_FAILED, and status says nothing was restored; a
// corrupt state.json is logged as what it is (not an interrupted apply, not an older
// agent), every code stays honest, and the next status shows the rebuild.
func TestTruthCodesThatDoNotLie(t *testing.T) {
	testprog.SkipIfShort(t)
	malformed := []struct{ name, body string }{
		{"invalid JSON", `{"action":"apply","sha":`},
		{"an unknown action", `{"action":"reboot","purge":false,"retry":false,"rollback":false,"next_checkin_s":60}`},
	}
	for _, tt := range malformed {
		t.Run("a check-in answered with "+tt.name, func(t *testing.T) {
			b := newTruthBox(t, boxOpts{})
			live := b.apply(1)
			reports := len(b.Stack.Tenancy.Reports(b.Env))
			tenURL := checkinProxy(t, b.Stack.Tenancy.URL(), tt.body)
			b.Configure(func(c *deployd.Config) { c.Tenancy.URL = tenURL })

			res := b.tickMExit(deployd.ExitTemporary)
			assert.Equal(t, string(codes.TenancyProtocol), tickCode(t, res.Stderr))
			assert.NotContains(t, res.Stderr, string(codes.ApplyFailed))
			assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "nothing is reported")
			assert.Equal(t, live, b.Live())
			state := readFile(t, b.Cfg.StatePath())
			assert.NotContains(t, string(state), string(codes.ApplyFailed))
			c := b.State().Condition
			require.NotNil(t, c)
			assert.Equal(t, codes.TenancyProtocol, c.Code)
			b.assertConditionMetrics(c)

			v, out, text := b.status(deployd.VerdictWarning, "")
			assert.Nil(t, v.LastRestore)
			for _, s := range []string{out, text} {
				assert.NotContains(t, s, string(codes.ApplyFailed))
				assert.NotContains(t, s, "restored")
			}
			assert.Regexp(t, `(?m)^condition:\s+TENANCY_PROTOCOL \(exit 75\)`, text)
		})
	}

	corrupt := []struct {
		name string
		// none: tenancy answers none; otherwise it asks for the live sha again.
		none bool
	}{{name: "tenancy asks for the live sha"}, {name: "tenancy answers none", none: true}}
	for _, tt := range corrupt {
		t.Run("a corrupt state.json, "+tt.name, func(t *testing.T) {
			b := newTruthBox(t, boxOpts{})
			b.apply(1)
			live := b.apply(2) // two releases: the older one's image record goes with the state
			if tt.none {
				b.SetDesired(faketenancy.Desired{Action: "none"})
			}
			leases, reports := b.Leases(), b.Stack.Tenancy.Reports(b.Env)
			corruptState(t, b.box)

			res := b.tickMExit(0)
			assert.Equal(t, `""`, tickCode(t, res.Stderr))
			assert.Contains(t, res.Stderr, "state.json did not parse; rebuilt the state from the live release and the kept file")
			for _, lie := range []string{"interrupted apply", "older agent", string(codes.ApplyFailed)} {
				assert.NotContains(t, res.Stderr, lie)
			}
			assert.Equal(t, leases, b.Leases(), "no lease")
			assert.Equal(t, live, b.Live())
			if !tt.none {
				assert.Contains(t, res.Stderr, "the state was rebuilt (state.json did not parse), so the live release is not known to be healthy")
				assert.Equal(t, "applied", b.LastReport().Result)
			} else {
				assert.Len(t, b.Stack.Tenancy.Reports(b.Env), len(reports))
			}
			aside, err := filepath.Glob(b.Cfg.StatePath() + ".corrupt-*")
			require.NoError(t, err)
			assert.Len(t, aside, 1, "the corrupt file is moved aside")

			v, out, text := b.status("", "")
			require.NotNil(t, v.Rebuilt, "the next status shows the rebuild")
			assert.Contains(t, v.Rebuilt.Why, "moved to "+aside[0])
			assert.Nil(t, v.LastRestore, "nothing was restored")
			assert.Regexp(t, `(?m)^rebuilt:\s+at \S+: state `+b.Cfg.StatePath()+` is corrupt`, text)
			for _, s := range []string{out, text} {
				assert.NotContains(t, s, string(codes.ApplyFailed))
				assert.NotContains(t, s, "previous release")
				assert.NotContains(t, s, "interrupted apply")
			}
		})
	}
}

// TestTruthStatusIsNotHealthy: status is never ok while the live release's service
// restarts, while the state dir cannot be written, or after a DISK_FULL tick that
// could not save its state.
func TestTruthStatusIsNotHealthy(t *testing.T) {
	testprog.SkipIfShort(t)
	restarting := []struct {
		name  string
		state fakedocker.State
	}{
		{"a restart count that rose since the last check-in", fakedocker.State{RestartCount: 3}},
		{"a container restarting", fakedocker.State{State: "restarting", ExitCode: 1, RestartCount: 1}},
	}
	for _, tt := range restarting {
		t.Run("the live release's service restarting: "+tt.name, func(t *testing.T) {
			b := newTruthBox(t, boxOpts{})
			sha := b.apply(1)
			require.Equal(t, 0, b.tickM().Code, "the check-in after the apply: the baseline")
			v, _ := b.statusJSON()
			require.Equal(t, deployd.VerdictOK, v.Verdict, "%+v", v.Problems)

			script := fastScript(nil)
			script.Releases = map[string]map[string]fakedocker.Service{sha: {"web": {States: []fakedocker.State{tt.state}}}}
			b.setScript(script)
			b.tickMExit(0) // the agent changes nothing on its own
			v, _, text := b.status(deployd.VerdictCritical, codes.Unhealthy)
			assert.False(t, v.Healthy)
			assert.Regexp(t, `^status:\s+CRITICAL: the live release \S+ is not healthy`, text)
			assert.Regexp(t, `(?m)^live health:\s+UNHEALTHY`, text)
			b.assertVerdictMetric(deployd.VerdictCritical)
			assert.Zero(t, parseMetrics(t, b.metrics)["monky_deployd_live_healthy"])
		})
	}

	t.Run("a state dir that cannot be written", func(t *testing.T) {
		b := newTruthBox(t, boxOpts{})
		b.apply(1)
		readOnlyDir(t, b.Cfg.StateDir)

		res := b.tickMExit(deployd.ExitFailed)
		assert.Contains(t, res.Stderr, "code="+string(codes.StateUnavailable))
		v, _, text := b.status(deployd.VerdictCritical, codes.StateUnavailable)
		assert.False(t, v.StateDir.Writable)
		assert.Contains(t, v.Problems[0].Problem, "cannot be written")
		assert.Regexp(t, `^status:\s+CRITICAL: the state dir cannot take the state: \S+ cannot be written`, text)
		b.assertVerdictMetric(deployd.VerdictCritical)
		assert.InDelta(t, 1, parseMetrics(t, b.metrics)["monky_deployd_exit_code"], 0)
	})

	t.Run("a DISK_FULL tick that could not save its state", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("filling the state dir needs a small tmpfs mounted over it, and mounting needs root; CI runs this as root")
		}
		b := newTruthBox(t, boxOpts{})
		b.apply(1)
		mountTmpfs(t, b.Cfg.StateDir, 4<<20, -1)
		v, _ := b.statusJSON()
		require.Equal(t, deployd.VerdictOK, v.Verdict, "%+v", v.Problems)
		fill(t, filepath.Join(b.Cfg.StateDir, "filler"), b.Cfg.StateDir, 0)

		res := b.tickMExit(deployd.ExitFailed)
		assert.Equal(t, string(codes.DiskFull), tickCode(t, res.Stderr))
		_, _, text := b.status(deployd.VerdictCritical, codes.DiskFull) // not the old healthy view
		assert.Regexp(t, `^status:\s+CRITICAL: `, text)
		b.assertVerdictMetric(deployd.VerdictCritical)
	})
}

// readOnlyDir makes dir impossible to write for the binary until the test ends: as
// root (whom no mode stops) a tmpfs with dir's content, remounted read-only; as
// another user, mode 0500.
func readOnlyDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(dir, 0o500))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		return
	}
	mountTmpfs(t, dir, 4<<20, -1)
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
}

// TestTruthHealthEvidenceInStatus: a release whose service fails its healthcheck is
// restored, and the failing service's last healthcheck output and log lines are kept
// with the failure: status (text and JSON) shows them under the failed sha, redacted
// (the secret the container printed is in neither status nor the state files), and
// the tick's log line names the service and the evidence.
func TestTruthHealthEvidenceInStatus(t *testing.T) {
	b := newTruthBox(t, boxOpts{})
	live := b.apply(1)
	sha := b.Publish(faketenancy.SampleApp(b.Env, 2))
	script := fastScript(nil)
	script.Releases = map[string]map[string]fakedocker.Service{sha: {"web": {
		States: []fakedocker.State{{Health: "unhealthy", HealthOutput: "GET /healthz: 503 database login refused for password " + testbox.DefaultSecret}},
		Logs:   "web starting\nconnecting with DB_PASSWORD=" + testbox.DefaultSecret + "\nFATAL: the database refused the login\n",
	}}}
	b.setScript(script)

	res := b.tickMExit(deployd.ExitFailed)
	assert.Equal(t, string(codes.Unhealthy), tickCode(t, res.Stderr))
	assert.Equal(t, live, b.Live(), "restored")
	line := tickLogLine(t, res.Stderr, "the release failed its health check")
	assert.Contains(t, line, "services=web")
	assert.Contains(t, line, "GET /healthz: 503 database login refused for password")
	assert.Contains(t, line, "FATAL: the database refused the login")
	assert.NotContains(t, res.Stderr, testbox.DefaultSecret)

	f, held := b.State().Failed[sha]
	require.True(t, held)
	for _, ev := range []string{"GET /healthz: 503 database login refused for password", "FATAL: the database refused the login"} {
		assert.Contains(t, f.Evidence, ev)
	}
	for _, p := range []string{b.Cfg.StatePath(), b.Cfg.KeepPath()} {
		assert.NotContains(t, string(readFile(t, p)), testbox.DefaultSecret, p)
	}

	v, out, text := b.status("", "")
	require.NotEmpty(t, v.FailedSHAs)
	assert.Equal(t, sha, v.FailedSHAs[0].SHA)
	assert.Equal(t, f.Evidence, v.FailedSHAs[0].Evidence)
	require.NotNil(t, v.LastRestore)
	assert.Equal(t, deployd.RestoreHealthy, v.LastRestore.Result)
	assert.Regexp(t, `(?m)^failed sha:\s+`+sha+` serial 2 UNHEALTHY\n  evidence:\s+--- health of web `, text, "the evidence follows the failed sha")
	assert.Regexp(t, `(?m)^\s+healthcheck at \S+: exit code \d+: GET /healthz: 503 database login refused for password`, text)
	assert.Regexp(t, `(?m)^\s+.*FATAL: the database refused the login$`, text)
	for _, s := range []string{out, text} {
		assert.NotContains(t, s, testbox.DefaultSecret)
	}
}

// tickLogLine is the log line of stderr whose msg starts with msg.
func tickLogLine(t *testing.T, stderr, msg string) string {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, `msg="`+msg) {
			return l
		}
	}
	require.Failf(t, "no such log line", "%q in:\n%s", msg, stderr)
	return ""
}

// TestTruthRatchetAfterACorruptState: what must survive a corrupt state.json
// survives it. The env-mismatch latch: still latched, and status and the metrics file
// still say so. (The replay ratchet: deployd's TestSignatureReplayAndRollback,
// "state.json corrupt"; the failed shas: TestCorruptStateKeepsWhatMustSurvive.)
func TestTruthRatchetAfterACorruptState(t *testing.T) {
	testprog.SkipIfShort(t)
	t.Run("the env-mismatch latch", func(t *testing.T) {
		b := newTruthBox(t, boxOpts{noGrant: true})
		b.placeForeignToken()
		b.tickMExit(deployd.ExitEnvMismatch)
		require.NotNil(t, b.State().EnvMismatch)

		corruptState(t, b.box)
		tenancyCalls, baoCalls := len(b.Stack.Tenancy.Requests()), len(b.Stack.Bao.Requests())
		var res result
		for run := 1; run <= 2; run++ {
			res = b.tickM()
			require.Equal(t, deployd.ExitEnvMismatch, res.Code, "run %d: %s", run, res.Stderr)
			assert.Contains(t, res.Stderr, "not contacting the network")
			assert.Len(t, b.Stack.Tenancy.Requests(), tenancyCalls, "run %d: the latch holds: no network", run)
			assert.Len(t, b.Stack.Bao.Requests(), baoCalls)
			v, _ := b.statusJSON()
			assert.Equal(t, deployd.VerdictCritical, v.Verdict, "run %d: status still tells the latch", run)
			require.NotNil(t, v.Latch, "run %d", run)
			assert.True(t, v.Latch.Active)
			require.NotEmpty(t, v.Problems)
			assert.Equal(t, codes.AgentEnvMismatch, v.Problems[0].Code)
		}
		assert.Contains(t, tickLogLine(t, res.Stderr, "AGENT_ENV_MISMATCH latched"), "not contacting the network")
		b.assertVerdictMetric(deployd.VerdictCritical)
		assert.InDelta(t, 1, parseMetrics(t, b.metrics)["monky_deployd_env_mismatch_latched"], 0)
	})
}

// TestTruthMetricsAfterAConfigTypo: a run whose config has an unknown key exits 1 and
// still writes the metrics file, replacing the one an earlier run left: exit_code 1,
// the status unknown (3). (What `status` and `status --json` say of that config is
// TestStatusOfAnUnreadableConfig's.)
func TestTruthMetricsAfterAConfigTypo(t *testing.T) {
	b := newTruthBox(t, boxOpts{})
	b.SetDesired(faketenancy.Desired{Action: "none"})
	b.tickMExit(0)
	require.InDelta(t, 0, parseMetrics(t, b.metrics)["monky_deployd_exit_code"], 0)
	b.assertVerdictMetric(deployd.VerdictOK)

	good := readFile(t, b.CfgPath)
	typo := filepath.Join(b.Dir, "typo.yaml")
	require.NoError(t, os.WriteFile(typo, append(bytes.Clone(good), "not_a_key: 1\n"...), 0o600))

	res := b.runExit(deployd.ExitFailed, []string{"run", "--config", typo, "--metrics-file", b.metrics})
	assert.Contains(t, res.Stderr, "not_a_key")
	assert.Contains(t, res.Stderr, "code="+string(codes.ConfigInvalid))
	assert.InDelta(t, 1, parseMetrics(t, b.metrics)["monky_deployd_exit_code"], 0, "the metrics file of the earlier run is replaced")
	b.assertVerdictMetric(deployd.VerdictUnknown)
}
