package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/hold"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestHoldCommand: hold --for sets a hold of the caller (cut to holds.max) and says
// until when and what waits in one line; hold shows it; hold --clear clears it.
func TestHoldCommand(t *testing.T) {
	b := newBox(t, boxOpts{})
	b.Configure(func(c *deployd.Config) { c.Holds.Max = deployd.Duration(3 * time.Hour) })

	r := runMainExit(t, 0, nil, "hold", "--config", b.CfgPath)
	assert.Equal(t, "no hold; waiting: nothing yet (the next check-in tells whether a release is published)\n", r.Stdout)

	before := time.Now().Truncate(time.Second)
	r = runMainExit(t, 0, nil, "hold", "--config", b.CfgPath, "--for", "2h", "--reason", "demo at 3")
	assert.Regexp(t, regexp.MustCompile(`^held until \d{4}-\d\d-\d\d \d\d:\d\d \S+; waiting: nothing yet`), r.Stdout)
	assert.Equal(t, 1, strings.Count(r.Stdout, "\n"), "one line back")
	h, err := hold.Read(b.Cfg.Holds.Dir)
	require.NoError(t, err)
	assert.Equal(t, os.Getuid(), h.UID)
	assert.Equal(t, "demo at 3", h.Reason)
	assert.WithinDuration(t, before.Add(2*time.Hour), h.Until, 2*time.Second)

	r = runMainExit(t, 0, nil, "hold", "--config", b.CfgPath)
	assert.Contains(t, r.Stdout, "by "+h.Owner+": demo at 3")

	r = runMainExit(t, 0, nil, "hold", "--config", b.CfgPath, "--for", "20h", "--reason", "all day")
	assert.Contains(t, r.Stdout, "(cut to holds.max, 3h0m0s)")
	h, err = hold.Read(b.Cfg.Holds.Dir)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Hour, h.Until.Sub(h.SetAt), "a hold longer than holds.max is cut to it")

	r = runMainExit(t, 0, nil, "hold", "--config", b.CfgPath, "--clear")
	assert.True(t, strings.HasPrefix(r.Stdout, "hold cleared;"), r.Stdout)
	_, err = hold.Read(b.Cfg.Holds.Dir)
	assert.ErrorIs(t, err, hold.ErrNone)

	require.NoError(t, os.Symlink("/etc/shadow", hold.Path(b.Cfg.Holds.Dir)))
	r = runMainExit(t, 0, nil, "hold", "--config", b.CfgPath)
	assert.Contains(t, r.Stdout, "the hold file is refused and the agent ignores it (it is a symlink")
	assert.NotContains(t, r.Stdout, "root:")
	runMainExit(t, 0, nil, "hold", "--config", b.CfgPath, "--clear")
	_, err = os.Lstat(hold.Path(b.Cfg.Holds.Dir))
	assert.ErrorIs(t, err, os.ErrNotExist, "--clear removes the link, not its target")
	_, err = os.Stat("/etc/shadow")
	if err == nil {
		assert.FileExists(t, "/etc/shadow")
	}
}

// TestHoldCommandErrors: hold refuses a hold directory that does not exist, exit 1.
// (Its usage errors, exit 2, are TestUsageErrorsExit2's.)
func TestHoldCommandErrors(t *testing.T) {
	b := newBox(t, boxOpts{})
	p := b.WriteConfig("nodir.yaml", func(c *deployd.Config) { c.Holds.Dir = filepath.Join(b.Dir, "missing") })
	r := runMain(t, nil, "hold", "--config", p, "--for", "1h", "--reason", "x")
	assert.Equal(t, deployd.ExitFailed, r.Code)
	assert.Contains(t, r.Stderr, "the hold directory does not exist")
}

// TestBinaryHold drives the shipped binary against the shipped fakes: the hold the
// hold command sets (cut to holds.max) defers a published bundle, exit 0, and the
// tick's line, the metrics file, status's first line and hold itself say so; hold
// --clear lets the next tick apply. (What a deferral costs — no lease, no report, one
// download and pull, the check-in's deferral, one lease for the switch — is deployd's
// TestHoldDefersPreparedNotQueued; the console's override, TestOverrideHold; a hostile
// hold file, TestHostileHoldFilesAreIgnored and TestHoldCommand.)
func TestBinaryHold(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.tickExit(0)
	require.Equal(t, first, b.Live())

	res := b.runExit(0, []string{"hold", "--config", b.CfgPath, "--for", "20h", "--reason", "demo at 3"})
	assert.Contains(t, res.Stdout, "(cut to holds.max, 8h0m0s)")

	bn := faketenancy.SampleApp(b.Env, 2)
	bn.Files["compose.yaml"] = strings.Replace(bn.Files["compose.yaml"], "nginx:1.27", "nginx:1.28", 1)
	sha := b.Publish(bn)
	metricsPath := filepath.Join(b.Dir, "state", "monky_deployd.prom")
	for range 2 {
		res = b.tickExit(0, "--metrics-file", metricsPath) // a deferral is not a failure: exit 0
		assert.Contains(t, res.Stderr, "apply deferred")
		assert.Contains(t, res.Stderr, "deferred=hold", "the tick's line says it deferred")
	}
	assert.Equal(t, first, b.Live())
	d, ok := b.Stack.Tenancy.LastDeferred(b.Env)
	require.True(t, ok, "the check-in carries the deferral")
	assert.Equal(t, "demo at 3", d.Reason)
	assert.NotEmpty(t, d.Owner, "the hold command names its caller")
	assert.Equal(t, `{why="hold"}`, labelsOf(t, metricsPath, "monky_deployd_deferred"))
	assert.Equal(t, 1.0, parseMetrics(t, metricsPath)["monky_deployd_deferred"])

	st := b.run([]string{"status", "--config", b.CfgPath})
	firstLine, _, _ := strings.Cut(st.Stdout, "\n")
	assert.Contains(t, firstLine, "DEFERRED: "+sha[:12]+" (serial 2) waits for the hold of "+d.Owner)
	show := b.run([]string{"hold", "--config", b.CfgPath})
	assert.Contains(t, show.Stdout, "waiting: "+sha[:12]+" (serial 2)")

	b.runExit(0, []string{"hold", "--config", b.CfgPath, "--clear"})
	b.tickExit(0)
	assert.Equal(t, sha, b.Live())
}
