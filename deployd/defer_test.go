package deployd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	holdfile "github.com/monky/monky-deployd/internal/hold"
)

// setHold writes a hold of the test's user, set at from, until until.
func setHold(t *testing.T, b *box, from, until time.Time) {
	t.Helper()
	require.NoError(t, holdfile.Write(b.Cfg.Holds.Dir, holdfile.Hold{Owner: "alice", UID: os.Getuid(), Reason: "demo at 3", SetAt: from, Until: until}))
}

// newerApp is the sample app of serial with an image the box does not hold yet, so
// that preparing it pulls.
func newerApp(env string, serial int64) faketenancy.BundleSpec {
	bn := faketenancy.SampleApp(env, serial)
	bn.Files["compose.yaml"] = strings.Replace(bn.Files["compose.yaml"], "nginx:1.27", "nginx:1.28", 1)
	return bn
}

func bundleDownloads(b *box) int { return b.TenancyCalls("/v1/agent/bundles/") }

// heldBox is a box serving the sample app of serial 1 under a hold of an hour.
func heldBox(t *testing.T) *box {
	t.Helper()
	b, _ := liveBox(t)
	setHold(t, b, time.Now(), time.Now().Add(time.Hour))
	return b
}

// deferSample publishes the sample app of serial and runs a tick that must defer it
// under b's hold, keeping its bundle; it returns the bundle's sha.
func (b *box) deferSample(serial int64) string {
	b.T.Helper()
	sha := b.Publish(faketenancy.SampleApp(b.Env, serial))
	out := b.tickExits(deployd.ExitOK)
	require.Equal(b.T, deployd.DeferHold, out.Deferred)
	return sha
}

// TestHoldDefersPreparedNotQueued: under a hold an apply downloads, verifies and
// pulls once, takes no lease and reports nothing (exit 0); later ticks check in with
// the deferral and download nothing; once the hold is cleared the next tick applies
// with one lease and no second download.
func TestHoldDefersPreparedNotQueued(t *testing.T) {
	t.Parallel()
	b, first := liveBox(t)
	leases, reports := b.Leases(), len(b.Stack.Tenancy.Reports(b.Env))
	setHold(t, b, time.Now(), time.Now().Add(2*time.Hour))
	sha := b.Publish(newerApp(b.Env, 2))
	downloads, pulls := bundleDownloads(b), len(b.DockerCalls("pull"))

	out := b.tickExits(deployd.ExitOK)
	assert.Equal(t, deployd.DeferHold, out.Deferred)
	assert.False(t, out.Leased)
	assert.Equal(t, leases, b.Leases(), "no lease while deferred")
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "a deferral is not reported")
	assert.Equal(t, downloads+1, bundleDownloads(b), "the first deferred tick downloads the bundle")
	assert.Greater(t, len(b.DockerCalls("pull")), pulls, "and pulls its images")
	assert.Equal(t, first, b.Live(), "the box keeps serving")
	st := b.State()
	require.NotNil(t, st.Deferral)
	assert.Equal(t, sha, st.Deferral.SHA)
	assert.True(t, st.Deferral.Prepared)
	assert.FileExists(t, filepath.Join(b.Cfg.PreparedDir(), sha+".bundle"))
	assert.Contains(t, b.agent.Status().Headline, "DEFERRED: "+sha[:12])
	assert.Contains(t, b.agent.Status().Headline, "demo at 3")
	note, ok := deployd.ReadDeferredNote(b.Cfg.Holds.Dir)
	require.True(t, ok, "the hold command reads what waits from the note")
	assert.Equal(t, sha, note.SHA)

	// Later ticks: the check-in carries the deferral; nothing is downloaded again.
	out = b.tickExits(deployd.ExitOK)
	assert.Equal(t, deployd.DeferHold, out.Deferred)
	d, ok := b.Stack.Tenancy.LastDeferred(b.Env)
	require.True(t, ok, "the check-in during the hold carries the deferral")
	assert.Equal(t, "hold", d.Why)
	assert.Equal(t, sha, d.SHA)
	assert.Equal(t, int64(2), d.Serial)
	assert.Equal(t, "alice", d.Owner)
	assert.Equal(t, "demo at 3", d.Reason)
	assert.True(t, d.Prepared)
	assert.Equal(t, downloads+1, bundleDownloads(b), "no second download")
	assert.Equal(t, leases, b.Leases())

	// The hold is cleared: the next tick switches with one lease, no download.
	require.NoError(t, holdfile.Clear(b.Cfg.Holds.Dir))
	out = b.tickExits(deployd.ExitOK)
	assert.Empty(t, out.Deferred)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, leases+1, b.Leases(), "one lease for the switch")
	assert.Equal(t, downloads+1, bundleDownloads(b), "the switch uses the kept bundle")
	assert.Equal(t, "applied", b.LastReport().Result)
	_, ok = b.Stack.Tenancy.LastDeferred(b.Env)
	assert.False(t, ok, "the switching tick's check-in carries no deferral")
	assert.Nil(t, b.State().Deferral)
	assert.NoFileExists(t, filepath.Join(b.Cfg.PreparedDir(), sha+".bundle"), "the kept bundle is used up")
	_, ok = deployd.ReadDeferredNote(b.Cfg.Holds.Dir)
	assert.False(t, ok)
}

// TestKeptBundleChangedIsDownloadedAgain: a kept bundle whose bytes changed is not
// used; the switch downloads it again.
func TestKeptBundleChangedIsDownloadedAgain(t *testing.T) {
	t.Parallel()
	b := heldBox(t)
	sha := b.deferSample(2)
	kept := filepath.Join(b.Cfg.PreparedDir(), sha+".bundle")
	data, err := os.ReadFile(kept)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(kept, data, 0o600))
	require.NoError(t, holdfile.Clear(b.Cfg.Holds.Dir))
	downloads := bundleDownloads(b)
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, downloads+1, bundleDownloads(b))
	assert.Contains(t, b.Logs.String(), "the kept bundle is missing or changed")
}

// TestOverrideHold: tenancy's override_hold applies under a hold.
func TestOverrideHold(t *testing.T) {
	t.Parallel()
	b := heldBox(t)
	sha := b.Publish(faketenancy.SampleApp(b.Env, 2))
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha, OverrideHold: true})
	out := b.tickExits(deployd.ExitOK)
	assert.Empty(t, out.Deferred)
	assert.Equal(t, sha, b.Live())
	assert.Contains(t, b.Logs.String(), "tenancy overrides the hold")
}

// TestDownIsNotDeferred: a down is the console's decision; a hold does not defer it.
func TestDownIsNotDeferred(t *testing.T) {
	t.Parallel()
	b := heldBox(t)
	b.SetDesired(faketenancy.Desired{Action: "down"})
	out := b.tickExits(deployd.ExitOK)
	assert.Empty(t, out.Deferred)
	assert.Equal(t, "down", out.Result)
	assert.Empty(t, b.Live())
}

// TestHostileHoldFilesAreIgnored: a hold file the agent must not trust is refused
// with a message that says why, and the box applies as without a hold. The agent
// treats every refusal alike (activeHold: any hold.RefusedError); which files are
// refused, and why, is internal/hold's TestReadRefusesHostileFiles (a symlink, 64 MiB,
// garbage, another owner's, and more).
func TestHostileHoldFilesAreIgnored(t *testing.T) {
	t.Parallel()
	b := idleBox(t)
	h := holdfile.Hold{Owner: "mallory", UID: os.Getuid() + 7, Reason: "x", SetAt: time.Now(), Until: time.Now().Add(time.Hour)}
	require.NoError(t, os.WriteFile(holdfile.Path(b.Cfg.Holds.Dir), holdfile.Marshal(h), 0o640))
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	out := b.tickExits(deployd.ExitOK)
	assert.Empty(t, out.Deferred)
	assert.Equal(t, sha, b.Live(), "the agent keeps working")
	assert.Contains(t, b.Logs.String(), "the hold file is refused and ignored")
	assert.Contains(t, b.Logs.String(), "written by uid")
}

// TestHoldIsCutToMax: a hold longer than holds.max ends holds.max after it was set.
func TestHoldIsCutToMax(t *testing.T) {
	t.Parallel()
	start := time.Now().Truncate(time.Second)
	c := deploydtest.NewClock(start)
	b := newBox(t, boxOptions{stack: &fakestack.Options{Now: c.Now}, now: c.Now,
		config: func(cfg *deployd.Config) { cfg.Holds.Max = deployd.Duration(time.Hour) }})
	b.applySample(1)
	setHold(t, b, start, start.Add(5*time.Hour))
	sha := b.Publish(faketenancy.SampleApp(b.Env, 2))
	c.Advance(59 * time.Minute)
	out := b.tickExits(deployd.ExitOK)
	assert.Equal(t, deployd.DeferHold, out.Deferred)
	require.NotNil(t, b.State().Deferral)
	assert.True(t, start.Add(time.Hour).Equal(b.State().Deferral.Until), "the end is set_at + holds.max")
	c.Advance(2 * time.Minute) // 61 minutes after start
	out = b.tickExits(deployd.ExitOK)
	assert.Empty(t, out.Deferred)
	assert.Equal(t, sha, b.Live())
}

// TestWindows: with an injected clock, an apply outside the windows is deferred
// (the check-in says when the next opens) and one inside applies; a window across
// midnight is open after midnight; a DST change moves the wall-clock window with it.
func TestWindows(t *testing.T) {
	t.Parallel()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	tests := []struct {
		name   string
		now    time.Time
		defers bool
		next   time.Time
	}{
		{"Monday noon: closed", time.Date(2026, 12, 7, 12, 0, 0, 0, loc), true, time.Date(2026, 12, 7, 19, 0, 0, 0, loc)},
		{"Monday 20:00: open", time.Date(2026, 12, 7, 20, 0, 0, 0, loc), false, time.Time{}},
		{"Tuesday 02:00, across midnight: open", time.Date(2026, 12, 8, 2, 0, 0, 0, loc), false, time.Time{}},
		{"Saturday 08:00: closed until Monday", time.Date(2026, 12, 12, 8, 0, 0, 0, loc), true, time.Date(2026, 12, 14, 19, 0, 0, 0, loc)},
		// Sunday 29 March 2026 jumps from 02:00 to 03:00: Monday's window still opens
		// at 19:00 on the wall, 17:00 UTC (it was 18:00 UTC the week before).
		{"the spring DST Sunday: closed", time.Date(2026, 3, 29, 12, 0, 0, 0, loc), true, time.Date(2026, 3, 30, 17, 0, 0, 0, time.UTC)},
		{"the Monday after, 19:30 CEST: open", time.Date(2026, 3, 30, 17, 30, 0, 0, time.UTC), false, time.Time{}},
		{"the Monday after, 18:30 CET would be, 18:30 CEST: closed", time.Date(2026, 3, 30, 16, 30, 0, 0, time.UTC), true, time.Date(2026, 3, 30, 17, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := deploydtest.NewClock(tt.now)
			b := newBox(t, boxOptions{stack: &fakestack.Options{Now: c.Now, TokenTTL: 96 * time.Hour}, now: c.Now, config: func(cfg *deployd.Config) {
				cfg.Windows = []deployd.WindowConfig{{Days: "mon-fri", From: "19:00", To: "07:00", TZ: "Europe/Berlin"}}
			}})
			b.idleTick()
			sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
			out := b.tickExits(deployd.ExitOK)
			if !tt.defers {
				assert.Empty(t, out.Deferred)
				assert.Equal(t, sha, b.Live())
				return
			}
			assert.Equal(t, deployd.DeferWindow, out.Deferred)
			assert.Empty(t, b.Live())
			assert.Zero(t, b.Leases())
			b.tickExits(deployd.ExitOK)
			d, ok := b.Stack.Tenancy.LastDeferred(b.Env)
			require.True(t, ok)
			assert.Equal(t, "window", d.Why)
			assert.True(t, tt.next.Equal(d.Until), "next opening %s, want %s", d.Until, tt.next)
			// The window opens: the next tick applies.
			c.Advance(tt.next.Add(time.Minute).Sub(c.Now()))
			out = b.tickExits(deployd.ExitOK)
			assert.Empty(t, out.Deferred)
			assert.Equal(t, sha, b.Live())
			assert.Equal(t, 1, b.Leases())
		})
	}
}

// TestSwitchEndingOn75KeepsTheBundle: a switch that ends on a temporary failure (the
// lease call answers 503) leaves the kept bundle: the next tick switches from it, with
// no second download; once the release is live and healthy, the kept copy is gone.
func TestSwitchEndingOn75KeepsTheBundle(t *testing.T) {
	t.Parallel()
	b := heldBox(t)
	sha := b.deferSample(2)
	downloads := bundleDownloads(b)
	require.NoError(t, holdfile.Clear(b.Cfg.Holds.Dir))
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"lease": 503}})
	b.tickExits(deployd.ExitTemporary)
	assert.FileExists(t, filepath.Join(b.Cfg.PreparedDir(), sha+".bundle"), "kept for the next try")
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, downloads, bundleDownloads(b), "no second download")
	assert.NoFileExists(t, filepath.Join(b.Cfg.PreparedDir(), sha+".bundle"))
}
