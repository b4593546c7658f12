package deployd_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
)

// TestApplyNoneDown walks a box through its life: self-bootstrap, apply, apply of the
// live sha (no lease), none, and down with purge on a dev tier (-v).
func TestApplyNoneDown(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))

	out := b.tickExits(deployd.ExitOK)
	assert.Equal(t, "apply", out.Action)
	assert.Equal(t, "applied", out.Result)
	assert.True(t, out.Leased)
	assert.Equal(t, sha, b.Live())
	rep := b.LastReport()
	assert.Equal(t, "applied", rep.Result)
	assert.Equal(t, sha, rep.SHA)
	assert.Len(t, rep.Services, 2)

	// The grant was consumed by the self-bootstrap.
	_, err := os.Stat(b.Cfg.BootstrapGrant)
	assert.True(t, os.IsNotExist(err), "grant file must be deleted after the first login")
	tok, err := os.Stat(b.Cfg.TokenPath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), tok.Mode().Perm())

	// The .env holds the vars, the secret and the project name, mode 0600.
	envFile := filepath.Join(b.Cfg.CurrentLink(), ".env")
	info, err := os.Stat(envFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	data, err := os.ReadFile(envFile)
	require.NoError(t, err)
	assert.Contains(t, string(data), "s3cr3t-db-password")
	assert.Contains(t, string(data), "COMPOSE_PROJECT_NAME=")
	assert.Contains(t, string(data), "LOG_LEVEL=")
	st, err := os.Stat(b.Cfg.StatePath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// apply of the live sha: applied again, no lease, no download.
	leases, downloads := b.TenancyCalls("/v1/agent/lease"), b.TenancyCalls("/v1/agent/bundles/")
	out = b.tickApplied()
	assert.False(t, out.Leased)
	assert.Equal(t, leases, b.TenancyCalls("/v1/agent/lease"))
	assert.Equal(t, downloads, b.TenancyCalls("/v1/agent/bundles/"))

	// none: nothing reported.
	b.SetDesired(faketenancy.Desired{Action: "none"})
	reports := len(b.Stack.Tenancy.Reports(b.Env))
	out = b.tickExits(deployd.ExitOK)
	assert.Equal(t, "none", out.Action)
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports)

	// down with purge on dev: -v, current removed, report down.
	b.SetDesired(faketenancy.Desired{Action: "down", Purge: true})
	out = b.tickExits(deployd.ExitOK)
	assert.Equal(t, "down", out.Result)
	assert.Equal(t, "", b.Live())
	downs := b.DockerCalls("down")
	require.Len(t, downs, 1)
	assert.Contains(t, downs[0].Argv, "-v")
	assert.Contains(t, downs[0].Argv, "--remove-orphans")
	assert.Equal(t, "down", b.LastReport().Result)
	assert.Equal(t, "", b.State().LiveSHA)
}

func TestProdNeverPurges(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{env: "env-prod-03"})
	b.applySample(1)
	b.SetDesired(faketenancy.Desired{Action: "down", Purge: true})
	out := b.tickExits(deployd.ExitOK)
	assert.Equal(t, "down", out.Result)
	downs := b.DockerCalls("down")
	require.Len(t, downs, 1)
	assert.NotContains(t, downs[0].Argv, "-v", "prod never purges")
	assert.Contains(t, b.Logs.String(), "prod never purges")
}

// sampleWith is the bundle of a refusal case: the sample app of serial 1, changed by
// edit.
func sampleWith(edit func(bn *faketenancy.BundleSpec)) func(b *box) []byte {
	return func(b *box) []byte {
		bn := faketenancy.SampleApp(b.Env, 1)
		edit(&bn)
		return testbox.Tarball(b.T, bn, true)
	}
}

// TestRefusalsCostNoLease: every refusal code reaches a failed report, and no lease
// and no OpenBao login are spent on a refused bundle.
func TestRefusalsCostNoLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		code   codes.Code
		bundle func(b *box) []byte
		setup  func(b *box)
	}{
		{name: "env mismatch", code: "ENV_MISMATCH", bundle: func(b *box) []byte {
			return testbox.Tarball(b.T, faketenancy.SampleApp("env-dev-02", 1), true)
		}},
		{name: "unresolved var", code: "UNRESOLVED_VARS", bundle: sampleWith(func(bn *faketenancy.BundleSpec) {
			bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx:${NGINX_TAG}\n"
		})},
		{name: "compose invalid", code: "COMPOSE_INVALID", bundle: sampleWith(func(bn *faketenancy.BundleSpec) {
			bn.Files["compose.yaml"] = "services:\n  web:\n    image: [nginx\n"
		})},
		{name: "privileged", code: "PRIVILEGED", bundle: sampleWith(func(bn *faketenancy.BundleSpec) {
			bn.Files["compose.yaml"] = privilegedCompose
		})},
		{name: "docker socket", code: "PRIVILEGED", bundle: sampleWith(func(bn *faketenancy.BundleSpec) {
			bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n"
		})},
		{name: "secret path", code: "SECRET_PATH", bundle: sampleWith(func(bn *faketenancy.BundleSpec) {
			bn.Secrets["DB_PASSWORD"] = faketenancy.SecretRef{Path: "../env-dev-02/db", Key: "password"}
		})},
		{name: "disk low", code: "DISK_LOW", bundle: sampleWith(func(bn *faketenancy.BundleSpec) {
			bn.MinFreeMB = 1 << 40
		})},
		{name: "symlink", code: codes.ManifestPaths, bundle: func(b *box) []byte {
			m := map[string]any{"schema": 1, "env_id": b.Env, "serial": 1, "compose_files": []string{"compose.yaml"},
				"files": []string{"compose.yaml", "link"}, "vars": map[string]string{}, "secrets": map[string]any{}}
			return rawTar(t, m,
				entry{hdr: tar.Header{Name: "compose.yaml", Typeflag: tar.TypeReg, Mode: 0o644}, body: "services:\n  web:\n    image: nginx\n"},
				entry{hdr: tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}})
		}},
		{name: "truncated tar", code: "BUNDLE_MALFORMED", bundle: func(b *box) []byte {
			return testbox.Tarball(b.T, faketenancy.SampleApp(b.Env, 1), false)
		}, setup: func(b *box) {
			whole := testbox.Tarball(b.T, faketenancy.SampleApp(b.Env, 1), false)
			serveBundle(b, whole[:len(whole)/2])
		}},
		{name: "sha mismatch", code: "SHA_MISMATCH", bundle: func(b *box) []byte {
			return testbox.Tarball(b.T, faketenancy.SampleApp(b.Env, 1), true)
		}, setup: func(b *box) {
			serveBundle(b, testbox.Tarball(b.T, faketenancy.SampleApp(b.Env, 99), false))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t, boxOptions{})
			// Bootstrap first, so that the only OpenBao login is the bootstrap's.
			b.idleTick()
			logins := b.BaoCalls("/login")
			if tc.setup != nil {
				tc.setup(b)
			}
			sha, _, err := b.Stack.Tenancy.PublishBundle(b.Env, tc.bundle(b))
			require.NoError(t, err)

			out := b.tickExits(deployd.ExitFailed)
			assert.Equal(t, "failed", out.Result)
			assert.Equal(t, tc.code, out.Code)
			assert.False(t, out.Leased)
			rep := b.LastReport()
			assert.Equal(t, "failed", rep.Result)
			assert.Equal(t, string(tc.code), rep.Code)
			assert.Equal(t, sha, rep.SHA)
			assert.Contains(t, rep.Detail, tc.code)
			assert.Zero(t, b.TenancyCalls("/v1/agent/lease"), "a refused bundle costs no lease")
			assert.Equal(t, logins, b.BaoCalls("/login"), "a refused bundle costs no OpenBao login")
			assert.Equal(t, "", b.Live())
			assert.NotContains(t, b.Logs.String(), "s3cr3t-db-password")
		})
	}
}

// serveBundle makes every bundle download answer data instead, complete and with a
// matching length: a bundle that arrived whole but is not what tenancy published.
func serveBundle(b *box, data []byte) {
	b.rt.set(func(req *http.Request, resp *http.Response) *http.Response {
		if strings.HasPrefix(req.URL.Path, "/v1/agent/bundles/") && resp.StatusCode == 200 {
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(data))
			resp.ContentLength = int64(len(data))
			resp.Header.Del("Content-Length")
		}
		return resp
	})
}

// TestFailedSHAMemoryAndRetry: a sha that failed is the run's failure with its code
// (for status), and is re-reported without a download or a lease, until tenancy asks
// with retry.
func TestFailedSHAMemoryAndRetry(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	sha := b.refusePrivileged()
	st := b.State()
	require.NotNil(t, st.LastFailure)
	assert.Equal(t, codes.Privileged, st.LastFailure.Code)
	assert.True(t, st.LastFailure.At.Equal(st.LastTick))
	downloads := b.TenancyCalls("/v1/agent/bundles/")

	b.tickEnds(deployd.ExitFailed, codes.Privileged)
	assert.Equal(t, downloads, b.TenancyCalls("/v1/agent/bundles/"), "no new download for a failed sha")
	assert.Zero(t, b.TenancyCalls("/v1/agent/lease"))
	assert.Equal(t, "PRIVILEGED", b.LastReport().Code)

	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha, Retry: true})
	b.tickEnds(deployd.ExitFailed, codes.Privileged)
	assert.Equal(t, downloads+1, b.TenancyCalls("/v1/agent/bundles/"), "retry downloads and verifies again")
}

// TestRollbackNeedsExplicitFlag: a lower serial is refused unless the check-in makes
// the rollback explicit.
func TestRollbackNeedsExplicitFlag(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	older := b.refuseRollback()
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"), "only the lease of serial 5: the refusal costs none")

	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: older, Rollback: true, Retry: true})
	b.tickApplied()
	assert.Equal(t, older, b.Live())
	assert.Equal(t, int64(3), b.State().LiveSerial)
}

// TestChangedConfigFileReachesContainers: a change in a bind-mounted config file (not
// the compose file) makes compose see a new bind source, so the container using it is
// recreated with the new content.
func TestChangedConfigFileReachesContainers(t *testing.T) {
	t.Parallel()
	b, first := liveBox(t)
	second := faketenancy.SampleApp(b.Env, 2)
	second.Files["config/app.toml"] = "listen = \":9090\"\n"
	secondSHA := b.apply(second)

	ups := b.DockerCalls("up")
	require.Len(t, ups, 2)
	d1, d2 := projectDir(ups[0].Argv), projectDir(ups[1].Argv)
	assert.Equal(t, first, filepath.Base(d1))
	assert.Equal(t, secondSHA, filepath.Base(d2))
	// The same relative bind resolves to a different source path with the new
	// content, which is what makes compose recreate the container.
	got, err := os.ReadFile(filepath.Join(d2, "config", "app.toml"))
	require.NoError(t, err)
	assert.Equal(t, "listen = \":9090\"\n", string(got))
	assert.NotEqual(t, d1, d2)
}

// TestRestoreAfterUnhealthy: an unhealthy service after promote restores the previous
// release, reports failed with the failing service's log lines (redacted), exit 1.
func TestRestoreAfterUnhealthy(t *testing.T) {
	t.Parallel()
	b, good := liveBox(t)

	bad := b.Publish(faketenancy.SampleApp(b.Env, 2))
	// Only the new release is unhealthy: the restored one comes back healthy.
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Releases: map[string]map[string]fakedocker.Service{bad: {
		"web": {States: []fakedocker.State{{Health: "starting"}, {Health: "unhealthy",
			HealthOutput: "db check: connection refused (password s3cr3t-db-password)"}},
			Logs: "boot\nconnecting with password s3cr3t-db-password\nfatal: database refused\n"},
	}}}))
	out := b.tickEnds(deployd.ExitFailed, codes.Unhealthy)
	assert.Equal(t, deployd.RestoreHealthy, out.Restore)
	assert.Equal(t, good, b.Live(), "current points back at the previous release")
	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, bad, rep.SHA)
	assert.Contains(t, rep.Detail, "restore: restored-healthy "+good[:12])
	// The health evidence: the failing healthcheck's output and exit code, then the logs.
	assert.Contains(t, rep.Tail, "--- health of web (container monky-web-1): running, health unhealthy ---")
	assert.Contains(t, rep.Tail, "exit code 1: db check: connection refused")
	assert.Less(t, strings.Index(rep.Tail, "db check"), strings.Index(rep.Tail, "fatal: database refused"), "healthchecks, then logs")
	assert.Contains(t, rep.Tail, "fatal: database refused")
	assert.NotContains(t, rep.Tail, "s3cr3t-db-password")
	ups := b.DockerCalls("up")
	require.Len(t, ups, 3, "up of the good release, of the bad one, and of the restored one")
	assert.Equal(t, good, filepath.Base(projectDir(ups[2].Argv)))
	st := b.State()
	assert.Equal(t, good, st.LiveSHA)
	assert.True(t, st.Confirmed)
	assert.Contains(t, st.Failed, bad)
	require.NotNil(t, st.LastRestore)
	assert.Equal(t, deployd.Restore{Result: deployd.RestoreHealthy, SHA: good, At: st.LastRestore.At}, *st.LastRestore)
}

// TestRestoreUnhealthyIsSaid: when the restored release does not come back healthy
// either, the report, the outcome and the state say the box is degraded.
func TestRestoreUnhealthyIsSaid(t *testing.T) {
	t.Parallel()
	b, good := liveBox(t)

	// Every release is unhealthy now (say, the database they share went away).
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Services: map[string]fakedocker.Service{
		"web": {States: []fakedocker.State{{Health: "unhealthy"}}},
	}}))
	b.Publish(faketenancy.SampleApp(b.Env, 2))
	out := b.tickExits(deployd.ExitFailed)
	assert.Equal(t, codes.Unhealthy, out.Code, "the code is the failed apply's")
	assert.Equal(t, deployd.RestoreUnhealthy, out.Restore)
	assert.Contains(t, b.LastReport().Detail, "restore: restored-unhealthy "+good[:12]+" (")
	st := b.State()
	assert.Equal(t, good, st.LiveSHA)
	assert.False(t, st.Confirmed, "the restored release never came up healthy")
	require.NotNil(t, st.LastRestore)
	assert.Equal(t, deployd.RestoreUnhealthy, st.LastRestore.Result)
	assert.Contains(t, st.LastRestore.Detail, "web")
}

// TestFirstApplyFailureTakesItDown: with nothing to restore, the failed release is
// taken down and current removed.
func TestFirstApplyFailureTakesItDown(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{script: &fakedocker.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: "Error response from daemon: pull access denied for nginx\n", Exit: 1},
	}}})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.tickEnds(deployd.ExitFailed, codes.ApplyFailed)
	assert.Equal(t, "", b.Live())
	assert.Len(t, b.DockerCalls("down"), 1)
	assert.Contains(t, b.LastReport().Tail, "pull access denied")
}

// TestExitCodes: what ends a tick 75 or 1 before anything is applied. (A sealed
// OpenBao is 75: TestSealedOpenBaoSpendsNoLease.)
func TestExitCodes(t *testing.T) {
	t.Parallel()
	t.Run("lock held is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		b.HoldLock()
		b.tickExits(deployd.ExitTemporary)
		assert.Empty(t, b.Stack.Tenancy.Requests(), "a held lock touches no network")
	})
	t.Run("tenancy 503 is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}})
		b.tickExits(deployd.ExitTemporary)
	})
	t.Run("tenancy unreachable is 75", func(t *testing.T) {
		b := idleBox(t)
		b.Stack.Tenancy.Close()
		b.tickExits(deployd.ExitTemporary)
	})
	t.Run("rate limited lease is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{stack: &fakestack.Options{LeaseBudget: 1}})
		b.applySample(1)
		b.Publish(faketenancy.SampleApp(b.Env, 2))
		out := b.tickExits(deployd.ExitTemporary)
		assert.Equal(t, "", out.Result, "a rate-limited lease reports nothing")
		require.NotNil(t, b.State().Condition)
		assert.Equal(t, codes.RateLimited, b.State().Condition.Code)
		assert.Empty(t, b.State().LastCode, "a temporary condition does not replace the reported code")
		assert.NotContains(t, b.State().Failed, "a rate limit is not a failure of the sha")
	})
	t.Run("no token and no grant is 1", func(t *testing.T) {
		b := newBox(t, boxOptions{noGrant: true})
		b.tickExits(deployd.ExitFailed)
		assert.Contains(t, b.Logs.String(), "bootstrap")
		assert.Empty(t, b.Stack.Tenancy.Requests())
	})
	t.Run("invalid token is 1 and says how to bootstrap", func(t *testing.T) {
		b := idleBox(t)
		b.Stack.Bao.InvalidateTokens(b.Env)
		out := b.tickExits(deployd.ExitFailed)
		assert.Equal(t, "", out.Action)
		assert.Contains(t, b.Logs.String(), "bootstrap")
		// A fresh grant heals it.
		b.PlaceGrant()
		b.tickExits(deployd.ExitOK)
	})
}

// TestEnvMismatchLatch: AGENT_ENV_MISMATCH exits 78 and latches: later runs exit 78
// without the network until env_id changes or the operator bootstraps.
func TestEnvMismatchLatch(t *testing.T) {
	b := latchedBox(t)
	b.latchedTick()

	// Bootstrapping with a grant of this env clears the latch.
	b.PlaceGrant()
	_, err := b.agent.Bootstrap(t.Context(), "")
	require.NoError(t, err)
	assert.Nil(t, b.State().EnvMismatch)
	b.SetDesired(faketenancy.Desired{Action: "none"})
	b.tickExits(deployd.ExitOK)
}

func TestLeaseShapesAreRefused(t *testing.T) {
	t.Parallel()
	for _, shape := range []string{"approle", "wrapped"} {
		t.Run(shape, func(t *testing.T) {
			b := newBox(t, boxOptions{})
			b.Stack.Tenancy.SetFaults(faketenancy.Faults{LeaseShape: shape})
			b.Publish(faketenancy.SampleApp(b.Env, 1))
			b.tickEnds(deployd.ExitFailed, codes.LeaseShape)
			assert.Equal(t, "LEASE_SHAPE", b.LastReport().Code)
			assert.Equal(t, 1, b.BaoCalls("/login"), "only the bootstrap login: nothing to unwrap, no AppRole")
			assert.Equal(t, "", b.Live())
		})
	}
}

func TestTokenRenewal(t *testing.T) {
	c := deploydtest.NewClock(time.Now())
	b := newBox(t, boxOptions{stack: &fakestack.Options{TokenTTL: time.Hour, Now: c.Now}, now: c.Now})
	b.idleTick()
	assert.Zero(t, b.BaoCalls("renew-self"))
	// Forty-five minutes later, under a third of the TTL is left: renew.
	c.Advance(45 * time.Minute)
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, 1, b.BaoCalls("renew-self"))
}

func TestCorruptStateIsMovedAside(t *testing.T) {
	t.Parallel()
	b, _ := liveBox(t)
	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), []byte("{not json"), 0o600))
	out := b.tickApplied()
	matches, _ := filepath.Glob(b.Cfg.StatePath() + ".corrupt-*")
	assert.Len(t, matches, 1)
	assert.Contains(t, b.Logs.String(), "state.json did not parse; rebuilt the state")
	assert.Contains(t, b.Logs.String(), "moved to "+matches[0])
	assert.NotContains(t, b.Logs.String(), "interrupted apply", "a corrupt state is not blamed on an interrupted apply")
	assert.False(t, out.Leased, "the state is rebuilt from the current symlink: no new lease")
	require.NotNil(t, b.State().Rebuilt, "the run that rebuilt the state keeps the note, for status")
	b.applySample(2)
	assert.Nil(t, b.State().Rebuilt, "the apply of a later run ends the note")
}

// TestCorruptStateKeepsWhatMustSurvive: a state.json that does not parse loses
// neither the memory of failed shas nor the latch: they come back from the kept file
// (Config.KeepPath), and a refused sha costs no second download.
func TestCorruptStateKeepsWhatMustSurvive(t *testing.T) {
	b := newBox(t, boxOptions{})
	sha := b.refusePrivileged()
	require.Contains(t, b.State().Failed, sha)
	kept, err := os.ReadFile(b.Cfg.KeepPath())
	require.NoError(t, err)
	assert.Contains(t, string(kept), sha, "the kept file holds the failed sha")

	require.NoError(t, os.WriteFile(b.Cfg.StatePath(), []byte(`{"schema":1,"failed":{`), 0o600))
	out := b.tickExits(deployd.ExitFailed)
	assert.Equal(t, codes.Privileged, out.Code, "told again as it failed")
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/bundles/"+sha), "the failed sha costs no second download")
	st := b.State()
	assert.Contains(t, st.Failed, sha)
	require.NotNil(t, st.Rebuilt)
	assert.Contains(t, st.Rebuilt.Kept, "1 failed shas")
	assert.Contains(t, st.Rebuilt.Why, "is corrupt")
}

// TestPrune keeps keep_releases releases.
func TestPrune(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	for serial := int64(1); serial <= 4; serial++ {
		b.apply(faketenancy.SampleApp(b.Env, serial))
	}
	entries, err := os.ReadDir(b.Cfg.ReleasesDir())
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Len(t, names, 2, "keep_releases: 2")
	assert.True(t, slices.Contains(names, b.Live()))
}

func TestStateHoldsNoSecret(t *testing.T) {
	t.Parallel()
	b, _ := liveBox(t)
	data, err := os.ReadFile(b.Cfg.StatePath())
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(data, &st))
	assert.NotContains(t, string(data), "s3cr3t")
	tok, err := os.ReadFile(b.Cfg.TokenPath())
	require.NoError(t, err)
	assert.NotContains(t, string(data), strings.TrimSpace(string(tok)))
}

// TestIdleTickRunsNoSubprocess: the idle tick (a new process each minute under the
// timer) execs no docker: the live health and the docker version come from the Engine
// API, and the version is kept in the state for an hour.
func TestIdleTickRunsNoSubprocess(t *testing.T) {
	t.Parallel()
	b, _ := liveBox(t)
	b.SetDesired(faketenancy.Desired{Action: "none"})
	before := len(b.DockerCalls(""))
	for range 3 {
		b.newAgent() // as a new process would
		b.tickExits(deployd.ExitOK)
	}
	var execs, versions, lists int
	for _, c := range b.DockerCalls("")[before:] {
		switch {
		case c.Argv[0] != "engine":
			execs++
		case c.Argv[2] == "/version":
			versions++
		case c.Argv[2] == "/containers/json":
			lists++
		}
	}
	assert.Zero(t, execs, "no docker process")
	assert.Zero(t, versions, "the docker version of the apply's check-in is reused")
	assert.Equal(t, 3, lists, "one list of the containers per check-in")
	for _, c := range b.Stack.Tenancy.Checkins(b.Env) {
		assert.NotEmpty(t, c.Host.DockerVersion)
	}
}

// TestDiskLowIsVerifiedAgain: DISK_LOW is a refusal of the box, not of the bundle: it is
// reported, but not remembered, so that the next tick verifies the bundle again once
// the operator has freed space — without a retry from tenancy, and without a lease
// while refused.
func TestDiskLowIsVerifiedAgain(t *testing.T) {
	b := newBox(t, boxOptions{})
	bn := faketenancy.SampleApp(b.Env, 1)
	bn.MinFreeMB = 1 << 40
	b.Publish(bn)
	b.tickEnds(deployd.ExitFailed, codes.DiskLow)
	assert.Empty(t, b.State().Failed, "DISK_LOW is not remembered against the sha")
	downloads := b.TenancyCalls("/v1/agent/bundles/")
	b.tickExits(deployd.ExitFailed)
	assert.Equal(t, downloads+1, b.TenancyCalls("/v1/agent/bundles/"), "verified again at the next tick")
	assert.Zero(t, b.TenancyCalls("/v1/agent/lease"))
	assert.Contains(t, b.Logs.String(), "Free space there")
}

// TestEnvMismatchAtReportLatches: AGENT_ENV_MISMATCH on the report latches like at the
// check-in: exit 78, and the next run touches no network.
func TestEnvMismatchAtReportLatches(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"report": 409}})
	b.tickExits(deployd.ExitEnvMismatch)
	require.NotNil(t, b.State().EnvMismatch)
	before := len(b.Stack.Tenancy.Requests())
	b.tickExits(deployd.ExitEnvMismatch)
	assert.Len(t, b.Stack.Tenancy.Requests(), before)
}

// idleCounter is a transport that counts CloseIdleConnections.
type idleCounter struct {
	http.RoundTripper
	closed atomic.Int32
}

func (c *idleCounter) CloseIdleConnections() { c.closed.Add(1) }

// TestCloseReleasesOpenBaoConnections: Close also closes the idle connections to
// OpenBao (found by the soak: a closed agent left an fd and two goroutines behind
// for the 90 s idle timeout).
func TestCloseReleasesOpenBaoConnections(t *testing.T) {
	dir := t.TempDir()
	cfg := deployd.DefaultConfig()
	cfg.EnvID = "env-dev-01"
	cfg.DeployDir, cfg.StateDir = filepath.Join(dir, "srv"), filepath.Join(dir, "state")
	cfg.BootstrapGrant = filepath.Join(dir, "grant.jwt")
	cfg.Tenancy.Transport, cfg.Tenancy.URL = "system", "http://127.0.0.1:1"
	cfg.Bao.Addr = "http://127.0.0.1:2"
	tr := &idleCounter{RoundTripper: http.DefaultTransport}
	a, err := deployd.New(t.Context(), cfg, deployd.Options{BaoHTTP: &http.Client{Transport: tr}})
	require.NoError(t, err)
	require.NoError(t, a.Close())
	assert.EqualValues(t, 1, tr.closed.Load())
}
