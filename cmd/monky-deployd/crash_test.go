package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// fastScript makes the one-shot migrate service exit 0 at once, so that the health
// wait ends at its first poll (the binary polls every 2s).
func fastScript(commands map[string]fakedocker.Command) *fakedocker.Script {
	return &fakedocker.Script{
		Commands: commands,
		Services: map[string]fakedocker.Service{"migrate": {States: []fakedocker.State{{State: "exited", ExitCode: 0}}}},
	}
}

// setScript replaces the fake docker's script (atomically: a docker call that starts
// meanwhile reads the old script or the new one, never half of one).
func (b *box) setScript(s *fakedocker.Script) {
	b.T.Helper()
	require.NoError(b.T, b.Docker.SetScript(s))
}

// crashBox is a box that serves an old release and has been asked for a new one.
type crashBox struct {
	*box
	old, new       faketenancy.BundleSpec
	oldSHA, newSHA string
	// leases is how many leases tenancy had granted when the new release was
	// published: before the run that a test kills.
	leases int
}

func newCrashBox(t *testing.T) *crashBox {
	t.Helper()
	b := newBox(t, boxOpts{script: fastScript(nil)})
	c := &crashBox{box: b, old: faketenancy.SampleApp(b.Env, 1), new: faketenancy.SampleApp(b.Env, 2)}
	c.new.Files["config/app.toml"] = "listen = \":9090\"\n# the new release\n"
	c.new.Files["config/extra.toml"] = "added = true\n"
	c.oldSHA = b.Publish(c.old)
	b.tickExit(0)
	require.Equal(t, c.oldSHA, b.Live())
	c.newSHA = b.Publish(c.new)
	c.leases = len(b.Stack.Tenancy.Leases(b.Env))
	return c
}

// bundleFiles returns every file of a bundle as its tar holds it, manifest.json
// included.
func bundleFiles(t *testing.T, bn faketenancy.BundleSpec) map[string][]byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(testbox.Tarball(t, bn, false)))
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeDir {
			continue
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[h.Name] = data
	}
}

// checkInvariant asserts what a crash may leave (docs/ARCHITECTURE.md, "The tick as a sequence"): `current` absent, or
// pointing at the old or the new release, and that release complete: every file of
// its bundle with the right content, and its .env (0600) with the secret.
func (c *crashBox) checkInvariant(t *testing.T, when string) (live string) {
	t.Helper()
	info, err := os.Lstat(c.Cfg.CurrentLink())
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	require.NoError(t, err, when)
	require.True(t, info.Mode()&fs.ModeSymlink != 0, "%s: current is a symlink", when)
	target, err := os.Readlink(c.Cfg.CurrentLink())
	require.NoError(t, err)
	live = filepath.Base(target)
	var bn faketenancy.BundleSpec
	switch live {
	case c.oldSHA:
		bn = c.old
	case c.newSHA:
		bn = c.new
	default:
		t.Fatalf("%s: current points at %q, neither the old nor the new release", when, target)
	}
	dir := filepath.Join(c.Cfg.ReleasesDir(), live)
	want := bundleFiles(t, bn)
	var got []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	}))
	wantNames := append(slices.Collect(maps.Keys(want)), ".env")
	slices.Sort(wantNames)
	slices.Sort(got)
	require.Equal(t, wantNames, got, "%s: the live release %s holds exactly its bundle's files and .env", when, live[:12])
	for name, data := range want {
		have := readFile(t, filepath.Join(dir, filepath.FromSlash(name)))
		require.Equal(t, string(data), string(have), "%s: %s of the live release", when, name)
	}
	envInfo, err := os.Stat(filepath.Join(dir, ".env"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), envInfo.Mode().Perm())
	env, err := dotenv.Read(filepath.Join(dir, ".env"))
	require.NoError(t, err)
	require.Equal(t, "s3cr3t-db-password", env["DB_PASSWORD"], "%s: the .env is whole", when)
	require.Equal(t, "monky", env["COMPOSE_PROJECT_NAME"])
	return live
}

// converge runs the binary again without a kill and asserts that it converges. The
// run is watched at its first docker call (the check-in's docker version, after the
// repair): no leftover of the killed run may be visible in releases/ then.
func (c *crashBox) converge(t *testing.T, liveAfterKill string) {
	t.Helper()
	c.setScript(fastScript(map[string]fakedocker.Command{"version": {Delay: time.Second}}))
	c.expireDockerVersion(t)
	versions, checkins := len(c.DockerCalls("version")), len(c.Stack.Tenancy.Checkins(c.Env))
	st, err := deployd.ReadState(c.Cfg)
	// recorded: the killed run logged in with its lease (a record with an expiry; one
	// without is a request whose answer it never read).
	recorded := err == nil && st.Lease != nil && st.Lease.SHA == c.newSHA && !st.Lease.ExpiresAt.IsZero()
	p := c.start([]string{"run", "--config", c.CfgPath})
	testprog.WaitFor(t, 30*time.Second, "the next run's first docker call", func() bool { return len(c.DockerCalls("version")) > versions })
	entries, err := os.ReadDir(c.Cfg.ReleasesDir())
	require.NoError(t, err)
	beforeCheckin := len(c.Stack.Tenancy.Checkins(c.Env)) == checkins
	c.setScript(fastScript(nil))
	for _, e := range entries {
		name := e.Name()
		if beforeCheckin {
			// Nothing of this run exists yet: every hidden entry would be a leftover.
			assert.False(t, strings.HasPrefix(name, "."), "leftover %s visible to the next run", name)
		} else {
			assert.False(t, strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".old"), "leftover %s visible to the next run", name)
		}
	}
	res := p.Wait(t, 60*time.Second)
	require.Equal(t, 0, res.Code, "the next run converges:\n%s", res.Stderr)
	require.Equal(t, c.newSHA, c.Live())
	c.checkInvariant(t, "after the next run")
	rep := c.LastReport()
	assert.Equal(t, "applied", rep.Result)
	assert.Equal(t, c.newSHA, rep.SHA)
	// One publish, one lease, wherever the kill fell: a lease request the killed run
	// sent just before it died (which tenancy may grant a moment later, seen under
	// load) and the next run's carry the same request id, and tenancy answers both
	// with one lease. Whether the next run asked is in its log.
	assert.Equal(t, 1, len(c.Stack.Tenancy.Leases(c.Env))-c.leases, "one publish, one lease")
	asked := strings.Count(res.Stderr, "deploy lease granted")
	switch {
	case liveAfterKill == c.newSHA:
		assert.Zero(t, asked, "the new release was staged and promoted before the kill: resuming it asks for no lease")
	case recorded:
		assert.Zero(t, asked, "killed before promote, after the login: the next run goes on under the recorded lease")
	default:
		assert.Equal(t, 1, asked, "killed before the login: the next run asks for the lease (the same one, if the killed run's request was granted)")
	}
	st = c.State()
	assert.Equal(t, c.newSHA, st.LiveSHA)
	assert.True(t, st.Confirmed)
	assert.Empty(t, st.Failed, "a kill is not a failure of the sha")
	left, err := os.ReadDir(c.Cfg.ReleasesDir())
	require.NoError(t, err)
	for _, e := range left {
		assert.False(t, strings.HasPrefix(e.Name(), "."), "the converged run leaves no hidden entry (%s)", e.Name())
	}
}

// expireDockerVersion drops the docker version the state keeps for an hour, so that the
// next run calls docker version right after its repair and before its check-in: the
// tests use that call as a pause point.
func (c *crashBox) expireDockerVersion(t testing.TB) {
	t.Helper()
	data, err := os.ReadFile(c.Cfg.StatePath())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(data, &st))
	delete(st, "docker_version")
	delete(st, "docker_version_at")
	out, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(c.Cfg.StatePath(), out, 0o600))
}

// crashPoint is a point of an apply at which the binary is stopped.
type crashPoint struct {
	// name names the point.
	name string
	// arm makes the run block at the kill point; reached reports that it is there.
	arm     func(c *crashBox)
	reached func(c *crashBox, p *testprog.Proc) bool
	// word, instead of reached: the kill point is a call of this docker command.
	word string
	// switched: current points at the new release after the kill, not the old one.
	switched bool
}

// wantLive is the release current points at after a stop at cp.
func (cp crashPoint) wantLive(c *crashBox) string {
	if cp.switched {
		return c.newSHA
	}
	return c.oldSHA
}

// delayTenancy arms a crash point at the tenancy call of the fake's fault key.
func delayTenancy(call string) func(c *crashBox) {
	return func(c *crashBox) {
		c.Stack.Tenancy.SetFaults(faketenancy.Faults{Delay: map[string]time.Duration{call: time.Minute}})
	}
}

// crashPoints are the kill points: every docker call of an apply, the download, the
// lease and the report.
func crashPoints() []crashPoint {
	delay := 30 * time.Second
	return []crashPoint{
		{
			name: "docker version at check-in",
			arm: func(c *crashBox) {
				c.setScript(fastScript(map[string]fakedocker.Command{"version": {Delay: delay}}))
				c.expireDockerVersion(c.T)
			},
			word: "version",
		},
		{
			name: "download",
			arm:  delayTenancy("bundle"),
			reached: func(c *crashBox, _ *testprog.Proc) bool {
				return exists(filepath.Join(c.Cfg.ReleasesDir(), "."+c.newSHA+".bundle"))
			},
		},
		{
			name:    "lease",
			arm:     delayTenancy("lease"),
			reached: logged("bundle verified"),
		},
		{
			name: "compose up",
			arm: func(c *crashBox) {
				c.setScript(fastScript(map[string]fakedocker.Command{"up": {Delay: delay}}))
			},
			word:     "up",
			switched: true,
		},
		{
			// The new release's web stays "starting": the wait polls until the kill. (A
			// delay of ps would stop the check-in's read of the live release first.)
			name: "the health wait",
			arm: func(c *crashBox) {
				s := fastScript(nil)
				s.Releases = map[string]map[string]fakedocker.Service{
					c.newSHA: {"web": {States: []fakedocker.State{{Health: "starting"}}}},
				}
				c.setScript(s)
			},
			reached: func(c *crashBox, p *testprog.Proc) bool {
				return strings.Contains(p.Stderr.String(), "docker compose up done") && len(c.DockerCalls("ps")) > 0
			},
			switched: true,
		},
		{
			name:     "report",
			arm:      delayTenancy("report"),
			reached:  logged("applied: every service is running and healthy"),
			switched: true,
		},
	}
}

// stopAt runs an apply, stops it at cp with sig (sent to the process group, as
// systemd does) and returns the run's result.
func (c *crashBox) stopAt(t *testing.T, cp crashPoint, sig syscall.Signal) result {
	t.Helper()
	cp.arm(c)
	reached := cp.reached
	if cp.word != "" {
		before := len(c.DockerCalls(cp.word))
		reached = func(c *crashBox, _ *testprog.Proc) bool { return len(c.DockerCalls(cp.word)) > before }
	}
	p := c.start([]string{"run", "--config", c.CfgPath})
	testprog.WaitFor(t, 60*time.Second, cp.name, func() bool { return reached(c, p) })
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	require.NoError(t, syscall.Kill(-p.Cmd.Process.Pid, sig))
	return p.Wait(t, 60*time.Second)
}

// TestCrashAtEachStep stops the binary at every docker call of an apply, during the
// download, during the lease and during the report: with SIGKILL (a crash), and with
// SIGTERM (systemctl stop, a shutdown, the end of run --loop). A stop is not a failure
// of the sha: the run exits 0 or 75 (never 1), the sha is not remembered as failed, no
// failed report goes out. Either way the invariant holds, the release is where a crash
// leaves it, and the next run converges — without a new lease when the release was
// already promoted.
func TestCrashAtEachStep(t *testing.T) {
	testprog.SkipIfShort(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		for _, cp := range crashPoints() {
			name := map[syscall.Signal]string{syscall.SIGKILL: "kill", syscall.SIGTERM: "SIGTERM"}[sig] + " at " + cp.name
			t.Run(name, func(t *testing.T) {
				c := newCrashBox(t)
				reports := len(c.Stack.Tenancy.Reports(c.Env))
				res := c.stopAt(t, cp, sig)
				c.Stack.Tenancy.SetFaults(faketenancy.Faults{})
				if sig == syscall.SIGKILL {
					require.Negative(t, res.Code, "killed, not exited:\n%s", res.Stderr)
				} else {
					assert.Contains(t, []int{0, 75}, res.Code, "a stop is not a failure:\n%s", res.Stderr)
					assert.NotContains(t, c.State().Failed, c.newSHA, "a stop is not a failure of the sha")
					for _, r := range c.Stack.Tenancy.Reports(c.Env)[reports:] {
						assert.NotEqual(t, "failed", r.Result, "a stop reports no failure: %+v", r)
					}
				}
				live := c.checkInvariant(t, "after the "+name)
				assert.Equal(t, cp.wantLive(c), live, "a stop leaves the release where a crash does")
				c.converge(t, live)
				t.Logf("%s: live %s after the stop, %d leases in all", name, live[:12], len(c.Stack.Tenancy.Leases(c.Env)))
			})
		}
	}
}

// TestCrashAtRandomPoints kills the binary after a random delay, for a number of
// seeds: half of them within the time a whole apply takes from the process start, half
// within the window from "read the environment's secrets" (staging starts) to the end,
// where the release is staged, its .env written, renamed, promoted and the state saved.
func TestCrashAtRandomPoints(t *testing.T) {
	testprog.SkipIfShort(t)
	const anchor = "read the environment's secrets"
	// How long a whole apply of the binary takes here, and its writing part.
	c := newCrashBox(t)
	p := c.start([]string{"run", "--config", c.CfgPath})
	start := time.Now()
	waitTight(t, func() bool { return strings.Contains(p.Stderr.String(), anchor) })
	staging := time.Now()
	res := p.Wait(t, 60*time.Second)
	full, window := time.Since(start), time.Since(staging)
	require.Equal(t, 0, res.Code, res.Stderr)
	t.Logf("a whole apply takes %s, %s of it from %q on", full.Round(time.Millisecond), window.Round(time.Millisecond), anchor)

	const seeds = 16
	outcomes := map[string]int{}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0x6d6f6e6b79))
		fromStaging := seed%2 == 1
		span, from := full, "start+"
		if fromStaging {
			span, from = window, "staging+"
		}
		after := time.Duration(rng.Int64N(int64(span) + 1))
		name := from + after.Round(time.Millisecond).String()
		t.Run(name, func(t *testing.T) {
			c := newCrashBox(t)
			p := c.start([]string{"run", "--config", c.CfgPath})
			if fromStaging {
				waitTight(t, func() bool { return strings.Contains(p.Stderr.String(), anchor) })
			}
			time.Sleep(after)
			res := p.Kill()
			live := c.checkInvariant(t, "after a kill at "+name)
			switch {
			case res.Code >= 0:
				outcomes["finished before the kill"]++
			case live == c.newSHA:
				outcomes["killed after promote"]++
			default:
				outcomes["killed before promote"]++
			}
			c.converge(t, live)
		})
	}
	t.Logf("outcomes of %d random kills: %v", seeds, outcomes)
}

// waitTight polls cond every 200µs, for a kill point that must not drift.
func waitTight(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func logged(msg string) func(c *crashBox, p *testprog.Proc) bool {
	return func(_ *crashBox, p *testprog.Proc) bool { return strings.Contains(p.Stderr.String(), msg) }
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestCrashDuringDown: a SIGKILL during compose down leaves current on the live release
// (complete); the next run takes it down and reports down.
func TestCrashDuringDown(t *testing.T) {
	testprog.SkipIfShort(t)
	c := newCrashBox(t)
	c.SetDesired(faketenancy.Desired{Action: "down"})
	c.setScript(fastScript(map[string]fakedocker.Command{"down": {Delay: 30 * time.Second}}))
	p := c.start([]string{"run", "--config", c.CfgPath})
	testprog.WaitFor(t, 30*time.Second, "compose down", func() bool { return len(c.DockerCalls("down")) > 0 })
	p.Kill()
	assert.Equal(t, c.oldSHA, c.checkInvariant(t, "after a kill during down"))
	c.setScript(fastScript(nil))
	c.tickExit(0)
	assert.Equal(t, "", c.Live())
	assert.Equal(t, "down", c.LastReport().Result)
	assert.Len(t, c.DockerCalls("down"), 2)
	assert.False(t, c.DockerStatus().Up)
	assert.Empty(t, c.State().LiveSHA)
}

// unhealthyScript makes web unhealthy at every health wait.
func unhealthyScript(commands map[string]fakedocker.Command) *fakedocker.Script {
	s := fastScript(commands)
	s.Services["web"] = fakedocker.Service{States: []fakedocker.State{{Health: "unhealthy"}}, Logs: "fatal: cannot start\n"}
	return s
}

// TestCrashDuringRestore: a SIGKILL while an unhealthy apply restores the previous
// release leaves `current` on that release; when the next run's apply fails again, the
// box must restore it again and go on serving it — not take the environment down as if
// it had served nothing.
func TestCrashDuringRestore(t *testing.T) {
	testprog.SkipIfShort(t)
	c := newCrashBox(t)
	// The new release is unhealthy; its logs call takes 2s, time enough to make the
	// restore's compose up hang.
	c.setScript(unhealthyScript(map[string]fakedocker.Command{"logs": {Delay: 2 * time.Second}}))
	p := c.start([]string{"run", "--config", c.CfgPath})
	testprog.WaitFor(t, 30*time.Second, "the failing service's logs", func() bool { return len(c.DockerCalls("logs")) > 0 })
	ups := len(c.DockerCalls("up"))
	c.setScript(unhealthyScript(map[string]fakedocker.Command{"up": {Delay: 30 * time.Second}}))
	testprog.WaitFor(t, 30*time.Second, "the restore's compose up", func() bool { return len(c.DockerCalls("up")) > ups })
	p.Kill()
	require.Equal(t, c.oldSHA, c.checkInvariant(t, "after a kill during the restore"), "current was already back on the old release")

	// The next run: the new sha is asked for again and fails again.
	c.setScript(unhealthyScript(nil))
	metricsPath := filepath.Join(t.TempDir(), "monky-deployd.prom")
	c.tickExit(deployd.ExitFailed, "--metrics-file", metricsPath)
	assert.Equal(t, "UNHEALTHY", c.LastReport().Code)
	assert.Equal(t, c.oldSHA, c.Live(), "the box goes on serving the old release")
	// The restored release is as unhealthy here: the box is degraded, and says so.
	assert.Equal(t, `{result="restored-unhealthy"}`, labelsOf(t, metricsPath, "monky_deployd_last_restore"))
	assert.Equal(t, 1.0, parseMetrics(t, metricsPath)["monky_deployd_last_restore"])
	assert.Equal(t, c.oldSHA, c.State().LiveSHA)
	ups2 := c.DockerCalls("up")
	require.NotEmpty(t, ups2)
	assert.Equal(t, c.oldSHA, filepath.Base(projectDirOf(ups2[len(ups2)-1].Argv)), "the last up is the restored old release")
}

// TestFailedApplyAfterDown: after tenancy took the environment down, a failed apply
// must leave it down — the downed release is not "what the box served".
func TestFailedApplyAfterDown(t *testing.T) {
	testprog.SkipIfShort(t)
	c := newCrashBox(t)
	c.SetDesired(faketenancy.Desired{Action: "down"})
	c.tickExit(0)
	require.Equal(t, "", c.Live())
	upsBefore := len(c.DockerCalls("up"))

	c.setScript(unhealthyScript(nil))
	c.SetDesired(faketenancy.Desired{Action: "apply", SHA: c.newSHA})
	c.tickExit(deployd.ExitFailed)
	assert.Equal(t, "UNHEALTHY", c.LastReport().Code)
	assert.Equal(t, "", c.Live(), "the box served nothing before the failed apply, and serves nothing after it")
	for _, call := range c.DockerCalls("up")[upsBefore:] {
		assert.NotEqual(t, c.oldSHA, filepath.Base(projectDirOf(call.Argv)), "the downed release must not come back up")
	}
	assert.False(t, c.DockerStatus().Up, "the failed release is taken down")
}

// projectDirOf returns the --project-directory of a docker compose argv.
func projectDirOf(argv []string) string {
	for i, a := range argv {
		if a == "--project-directory" && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}
