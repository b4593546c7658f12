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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// TestApplyNoneDown walks a box through its life: self-bootstrap, apply, apply of the
// live sha (no lease), none, and down with purge on a dev tier (-v).
func TestApplyNoneDown(t *testing.T) {
	b := newBox(t, boxOptions{})
	sha := b.publish(faketenancy.SampleApp(b.env, 1))

	out, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "apply", out.Action)
	assert.Equal(t, "applied", out.Result)
	assert.True(t, out.Leased)
	assert.Equal(t, sha, b.live())
	rep := b.lastReport()
	assert.Equal(t, "applied", rep.Result)
	assert.Equal(t, sha, rep.SHA)
	assert.Len(t, rep.Services, 2)

	// The grant was consumed by the self-bootstrap.
	_, err := os.Stat(b.cfg.BootstrapGrant)
	assert.True(t, os.IsNotExist(err), "grant file must be deleted after the first login")
	tok, err := os.Stat(b.cfg.TokenPath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), tok.Mode().Perm())

	// The .env holds the vars, the secret and the project name, mode 0600.
	envFile := filepath.Join(b.cfg.CurrentLink(), ".env")
	info, err := os.Stat(envFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	data, err := os.ReadFile(envFile)
	require.NoError(t, err)
	assert.Contains(t, string(data), "s3cr3t-db-password")
	assert.Contains(t, string(data), "COMPOSE_PROJECT_NAME=")
	assert.Contains(t, string(data), "LOG_LEVEL=")
	st, err := os.Stat(b.cfg.StatePath())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// apply of the live sha: applied again, no lease, no download.
	leases, downloads := b.calls("/v1/agent/lease"), b.calls("/v1/agent/bundles/")
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "applied", out.Result)
	assert.False(t, out.Leased)
	assert.Equal(t, leases, b.calls("/v1/agent/lease"))
	assert.Equal(t, downloads, b.calls("/v1/agent/bundles/"))

	// none: nothing reported.
	b.setDesired(faketenancy.Desired{Action: "none"})
	reports := len(b.stack.Reports(b.env))
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "none", out.Action)
	assert.Len(t, b.stack.Reports(b.env), reports)

	// down with purge on dev: -v, current removed, report down.
	b.setDesired(faketenancy.Desired{Action: "down", Purge: true})
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "down", out.Result)
	assert.Equal(t, "", b.live())
	downs := b.dockerCalls("down")
	require.Len(t, downs, 1)
	assert.Contains(t, downs[0], "-v")
	assert.Contains(t, downs[0], "--remove-orphans")
	assert.Equal(t, "down", b.lastReport().Result)
	assert.Equal(t, "", b.state().LiveSHA)
}

func TestProdNeverPurges(t *testing.T) {
	b := newBox(t, boxOptions{env: "env-prod-03"})
	b.publish(faketenancy.SampleApp(b.env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	b.setDesired(faketenancy.Desired{Action: "down", Purge: true})
	out, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "down", out.Result)
	downs := b.dockerCalls("down")
	require.Len(t, downs, 1)
	assert.NotContains(t, downs[0], "-v", "prod never purges")
	assert.Contains(t, b.logs.String(), "prod never purges")
}

// TestRefusalsCostNoLease: every refusal code reaches a failed report, and no lease
// and no OpenBao login are spent on a refused bundle.
func TestRefusalsCostNoLease(t *testing.T) {
	tests := []struct {
		name   string
		code   codes.Code
		bundle func(b *box) []byte
		setup  func(b *box)
	}{
		{name: "env mismatch", code: "ENV_MISMATCH", bundle: func(b *box) []byte {
			return tarball(b.t, faketenancy.SampleApp("env-dev-02", 1), true)
		}},
		{name: "unresolved var", code: "UNRESOLVED_VARS", bundle: func(b *box) []byte {
			bn := faketenancy.SampleApp(b.env, 1)
			bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx:${NGINX_TAG}\n"
			return tarball(b.t, bn, true)
		}},
		{name: "compose invalid", code: "COMPOSE_INVALID", bundle: func(b *box) []byte {
			bn := faketenancy.SampleApp(b.env, 1)
			bn.Files["compose.yaml"] = "services:\n  web:\n    image: [nginx\n"
			return tarball(b.t, bn, true)
		}},
		{name: "privileged", code: "PRIVILEGED", bundle: func(b *box) []byte {
			bn := faketenancy.SampleApp(b.env, 1)
			bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    privileged: true\n"
			return tarball(b.t, bn, true)
		}},
		{name: "docker socket", code: "PRIVILEGED", bundle: func(b *box) []byte {
			bn := faketenancy.SampleApp(b.env, 1)
			bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n"
			return tarball(b.t, bn, true)
		}},
		{name: "secret path", code: "SECRET_PATH", bundle: func(b *box) []byte {
			bn := faketenancy.SampleApp(b.env, 1)
			bn.Secrets["DB_PASSWORD"] = faketenancy.SecretRef{Path: "../env-dev-02/db", Key: "password"}
			return tarball(b.t, bn, true)
		}},
		{name: "disk low", code: "DISK_LOW", bundle: func(b *box) []byte {
			bn := faketenancy.SampleApp(b.env, 1)
			bn.MinFreeMB = 1 << 40
			return tarball(b.t, bn, true)
		}},
		{name: "symlink", code: codes.ManifestPaths, bundle: func(b *box) []byte {
			m := map[string]any{"schema": 1, "env_id": b.env, "serial": 1, "compose_files": []string{"compose.yaml"},
				"files": []string{"compose.yaml", "link"}, "vars": map[string]string{}, "secrets": map[string]any{}}
			return rawTar(t, m,
				entry{hdr: tar.Header{Name: "compose.yaml", Typeflag: tar.TypeReg, Mode: 0o644}, body: "services:\n  web:\n    image: nginx\n"},
				entry{hdr: tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}})
		}},
		{name: "truncated tar", code: "BUNDLE_MALFORMED", bundle: func(b *box) []byte {
			return tarball(b.t, faketenancy.SampleApp(b.env, 1), false)
		}, setup: func(b *box) {
			whole := tarball(b.t, faketenancy.SampleApp(b.env, 1), false)
			serveBundle(b, whole[:len(whole)/2])
		}},
		{name: "sha mismatch", code: "SHA_MISMATCH", bundle: func(b *box) []byte {
			return tarball(b.t, faketenancy.SampleApp(b.env, 1), true)
		}, setup: func(b *box) {
			serveBundle(b, tarball(b.t, faketenancy.SampleApp(b.env, 99), false))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t, boxOptions{})
			// Bootstrap first, so that the only OpenBao login is the bootstrap's.
			b.setDesired(faketenancy.Desired{Action: "none"})
			_, code := b.tick()
			require.Equal(t, deployd.ExitOK, code)
			logins := b.baoCalls("/login")
			if tc.setup != nil {
				tc.setup(b)
			}
			sha, _ := b.stack.PublishBundle(b.env, tc.bundle(b))

			out, code := b.tick()
			assert.Equal(t, deployd.ExitFailed, code)
			assert.Equal(t, "failed", out.Result)
			assert.Equal(t, tc.code, out.Code)
			assert.False(t, out.Leased)
			rep := b.lastReport()
			assert.Equal(t, "failed", rep.Result)
			assert.Equal(t, string(tc.code), rep.Code)
			assert.Equal(t, sha, rep.SHA)
			assert.Contains(t, rep.Detail, tc.code)
			assert.Zero(t, b.calls("/v1/agent/lease"), "a refused bundle costs no lease")
			assert.Equal(t, logins, b.baoCalls("/login"), "a refused bundle costs no OpenBao login")
			assert.Equal(t, "", b.live())
			assert.NotContains(t, b.logs.String(), "s3cr3t-db-password")
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

// TestFailedSHAMemoryAndRetry: a sha that failed is re-reported without a download or
// a lease, until tenancy asks with retry.
func TestFailedSHAMemoryAndRetry(t *testing.T) {
	b := newBox(t, boxOptions{})
	bn := faketenancy.SampleApp(b.env, 1)
	bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    privileged: true\n"
	sha := b.publish(bn)
	_, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	downloads := b.calls("/v1/agent/bundles/")

	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Privileged, out.Code)
	assert.Equal(t, downloads, b.calls("/v1/agent/bundles/"), "no new download for a failed sha")
	assert.Zero(t, b.calls("/v1/agent/lease"))
	assert.Equal(t, "PRIVILEGED", b.lastReport().Code)

	b.setDesired(faketenancy.Desired{Action: "apply", SHA: sha, Retry: true})
	out, code = b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Privileged, out.Code)
	assert.Equal(t, downloads+1, b.calls("/v1/agent/bundles/"), "retry downloads and verifies again")
}

// TestRollbackNeedsExplicitFlag: a lower serial is refused unless the check-in makes
// the rollback explicit.
func TestRollbackNeedsExplicitFlag(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.publish(faketenancy.SampleApp(b.env, 5))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	older := b.publish(faketenancy.SampleApp(b.env, 3))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Rollback, out.Code)
	assert.Equal(t, 1, b.calls("/v1/agent/lease"))

	b.setDesired(faketenancy.Desired{Action: "apply", SHA: older, Rollback: true, Retry: true})
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "applied", out.Result)
	assert.Equal(t, older, b.live())
	assert.Equal(t, int64(3), b.state().LiveSerial)
}

// TestChangedConfigFileReachesContainers: a change in a bind-mounted config file (not
// the compose file) makes compose see a new bind source, so the container using it is
// recreated with the new content.
func TestChangedConfigFileReachesContainers(t *testing.T) {
	b := newBox(t, boxOptions{})
	first := b.publish(faketenancy.SampleApp(b.env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	second := faketenancy.SampleApp(b.env, 2)
	second.Files["config/app.toml"] = "listen = \":9090\"\n"
	secondSHA := b.publish(second)
	_, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)

	ups := b.dockerCalls("up")
	require.Len(t, ups, 2)
	d1, d2 := projectDir(ups[0]), projectDir(ups[1])
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
	b := newBox(t, boxOptions{})
	good := b.publish(faketenancy.SampleApp(b.env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)

	bad := b.publish(faketenancy.SampleApp(b.env, 2))
	// Only the new release is unhealthy: the restored one comes back healthy.
	b.docker.SetScript(&fakedockertest.Script{Releases: map[string]map[string]fakedocker.Service{bad: {
		"web": {States: []fakedocker.State{{Health: "starting"}, {Health: "unhealthy",
			HealthOutput: "db check: connection refused (password s3cr3t-db-password)"}},
			Logs: "boot\nconnecting with password s3cr3t-db-password\nfatal: database refused\n"},
	}}})
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Unhealthy, out.Code)
	assert.Equal(t, deployd.RestoreHealthy, out.Restore)
	assert.Equal(t, good, b.live(), "current points back at the previous release")
	rep := b.lastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, bad, rep.SHA)
	assert.Contains(t, rep.Detail, "restore: restored-healthy "+good[:12])
	// The health evidence: the failing healthcheck's output and exit code, then the logs.
	assert.Contains(t, rep.Tail, "--- health of web (container monky-web-1): running, health unhealthy ---")
	assert.Contains(t, rep.Tail, "exit code 1: db check: connection refused")
	assert.Less(t, strings.Index(rep.Tail, "db check"), strings.Index(rep.Tail, "fatal: database refused"), "healthchecks, then logs")
	assert.Contains(t, rep.Tail, "fatal: database refused")
	assert.NotContains(t, rep.Tail, "s3cr3t-db-password")
	ups := b.dockerCalls("up")
	require.Len(t, ups, 3, "up of the good release, of the bad one, and of the restored one")
	assert.Equal(t, good, filepath.Base(projectDir(ups[2])))
	st := b.state()
	assert.Equal(t, good, st.LiveSHA)
	assert.True(t, st.Confirmed)
	assert.Contains(t, st.Failed, bad)
	require.NotNil(t, st.LastRestore)
	assert.Equal(t, deployd.Restore{Result: deployd.RestoreHealthy, SHA: good, At: st.LastRestore.At}, *st.LastRestore)
}

// TestRestoreUnhealthyIsSaid: when the restored release does not come back healthy
// either, the report, the outcome and the state say the box is degraded.
func TestRestoreUnhealthyIsSaid(t *testing.T) {
	b := newBox(t, boxOptions{})
	good := b.publish(faketenancy.SampleApp(b.env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)

	// Every release is unhealthy now (say, the database they share went away).
	b.docker.SetScript(&fakedockertest.Script{Services: map[string]fakedocker.Service{
		"web": {States: []fakedocker.State{{Health: "unhealthy"}}},
	}})
	b.publish(faketenancy.SampleApp(b.env, 2))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Unhealthy, out.Code, "the code is the failed apply's")
	assert.Equal(t, deployd.RestoreUnhealthy, out.Restore)
	assert.Contains(t, b.lastReport().Detail, "restore: restored-unhealthy "+good[:12]+" (")
	st := b.state()
	assert.Equal(t, good, st.LiveSHA)
	assert.False(t, st.Confirmed, "the restored release never came up healthy")
	require.NotNil(t, st.LastRestore)
	assert.Equal(t, deployd.RestoreUnhealthy, st.LastRestore.Result)
	assert.Contains(t, st.LastRestore.Detail, "web")
}

// TestFirstApplyFailureTakesItDown: with nothing to restore, the failed release is
// taken down and current removed.
func TestFirstApplyFailureTakesItDown(t *testing.T) {
	b := newBox(t, boxOptions{script: &fakedockertest.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: "Error response from daemon: pull access denied for nginx\n", Exit: 1},
	}}})
	b.publish(faketenancy.SampleApp(b.env, 1))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.ApplyFailed, out.Code)
	assert.Equal(t, "", b.live())
	assert.Len(t, b.dockerCalls("down"), 1)
	assert.Contains(t, b.lastReport().Tail, "pull access denied")
}

func TestExitCodes(t *testing.T) {
	t.Run("lock held is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		require.NoError(t, os.MkdirAll(b.cfg.StateDir, 0o700))
		l, err := fsutil.TryLock(b.cfg.LockPath())
		require.NoError(t, err)
		defer l.Unlock()
		_, code := b.tick()
		assert.Equal(t, deployd.ExitTemporary, code)
		assert.Empty(t, b.stack.Requests(), "a held lock touches no network")
	})
	t.Run("tenancy 503 is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		b.stack.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}})
		_, code := b.tick()
		assert.Equal(t, deployd.ExitTemporary, code)
	})
	t.Run("tenancy unreachable is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		b.setDesired(faketenancy.Desired{Action: "none"})
		_, code := b.tick()
		require.Equal(t, deployd.ExitOK, code)
		b.stack.Tenancy.Close()
		_, code = b.tick()
		assert.Equal(t, deployd.ExitTemporary, code)
	})
	t.Run("rate limited lease is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{stack: &fakestack.Options{LeaseBudget: 1}})
		b.publish(faketenancy.SampleApp(b.env, 1))
		_, code := b.tick()
		require.Equal(t, deployd.ExitOK, code)
		b.publish(faketenancy.SampleApp(b.env, 2))
		out, code := b.tick()
		assert.Equal(t, deployd.ExitTemporary, code)
		assert.Equal(t, "", out.Result, "a rate-limited lease reports nothing")
		assert.Equal(t, codes.RateLimited, b.state().LastTemporary)
		assert.Empty(t, b.state().LastCode, "a temporary condition does not replace the reported code")
		assert.NotContains(t, b.state().Failed, "a rate limit is not a failure of the sha")
	})
	t.Run("sealed OpenBao is 75", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		b.setDesired(faketenancy.Desired{Action: "none"})
		_, code := b.tick()
		require.Equal(t, deployd.ExitOK, code)
		b.stack.Bao.SetSealed(true)
		b.publish(faketenancy.SampleApp(b.env, 1))
		out, code := b.tick()
		assert.Equal(t, deployd.ExitTemporary, code)
		assert.Equal(t, codes.Unavailable, out.Code)
		b.stack.Bao.SetSealed(false)
		b.setDesired(faketenancy.Desired{Action: "apply", SHA: out.SHA})
		out, code = b.tick()
		assert.Equal(t, deployd.ExitOK, code)
		assert.Equal(t, "applied", out.Result)
	})
	t.Run("no token and no grant is 1", func(t *testing.T) {
		b := newBox(t, boxOptions{noGrant: true})
		_, code := b.tick()
		assert.Equal(t, deployd.ExitFailed, code)
		assert.Contains(t, b.logs.String(), "bootstrap")
		assert.Empty(t, b.stack.Requests())
	})
	t.Run("invalid token is 1 and says how to bootstrap", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		b.setDesired(faketenancy.Desired{Action: "none"})
		_, code := b.tick()
		require.Equal(t, deployd.ExitOK, code)
		b.stack.Bao.InvalidateTokens(b.env)
		out, code := b.tick()
		assert.Equal(t, deployd.ExitFailed, code)
		assert.Equal(t, "", out.Action)
		assert.Contains(t, b.logs.String(), "bootstrap")
		// A fresh grant heals it.
		b.placeGrant()
		_, code = b.tick()
		assert.Equal(t, deployd.ExitOK, code)
	})
}

// TestEnvMismatchLatch: AGENT_ENV_MISMATCH exits 78 and latches: later runs exit 78
// without the network until env_id changes or the operator bootstraps.
func TestEnvMismatchLatch(t *testing.T) {
	b := newBox(t, boxOptions{})
	// The box holds a token of another env.
	require.NoError(t, os.MkdirAll(b.cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b.cfg.TokenPath(), []byte(b.stack.Token("env-dev-02")), 0o600))
	require.NoError(t, os.Remove(b.cfg.BootstrapGrant))
	_, code := b.tick()
	assert.Equal(t, deployd.ExitEnvMismatch, code)
	require.NotNil(t, b.state().EnvMismatch)

	before := len(b.stack.Requests())
	beforeBao := len(b.stack.BaoRequests())
	_, code = b.tick()
	assert.Equal(t, deployd.ExitEnvMismatch, code)
	assert.Len(t, b.stack.Requests(), before, "a latched run touches no network")
	assert.Len(t, b.stack.BaoRequests(), beforeBao)

	// Bootstrapping with a grant of this env clears the latch.
	b.placeGrant()
	_, err := b.agent.Bootstrap(t.Context(), "")
	require.NoError(t, err)
	assert.Nil(t, b.state().EnvMismatch)
	b.setDesired(faketenancy.Desired{Action: "none"})
	_, code = b.tick()
	assert.Equal(t, deployd.ExitOK, code)
}

func TestLeaseShapesAreRefused(t *testing.T) {
	for _, shape := range []string{"approle", "wrapped"} {
		t.Run(shape, func(t *testing.T) {
			b := newBox(t, boxOptions{})
			b.stack.SetFaults(faketenancy.Faults{LeaseShape: shape})
			b.publish(faketenancy.SampleApp(b.env, 1))
			out, code := b.tick()
			assert.Equal(t, deployd.ExitFailed, code)
			assert.Equal(t, codes.LeaseShape, out.Code)
			assert.Equal(t, "LEASE_SHAPE", b.lastReport().Code)
			assert.Equal(t, 1, b.baoCalls("/login"), "only the bootstrap login: nothing to unwrap, no AppRole")
			assert.Equal(t, "", b.live())
		})
	}
}

// TestSupersededGrant: a newer lease issued between the lease and the login makes the
// login fail: UNAUTHENTICATED, exit 1, the box keeps serving what it served.
func TestSupersededGrant(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.setDesired(faketenancy.Desired{Action: "none"})
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	b.rt.set(func(req *http.Request, resp *http.Response) *http.Response {
		if req.URL.Path == "/v1/agent/lease" {
			b.stack.Grant(b.env) // someone else got a newer grant
		}
		return resp
	})
	b.publish(faketenancy.SampleApp(b.env, 1))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Unauthenticated, out.Code)
	assert.True(t, out.Leased)
	assert.Equal(t, "", b.live())
}

func TestTokenRenewal(t *testing.T) {
	now := time.Now()
	clock := &now
	nowFn := func() time.Time { return *clock }
	b := newBox(t, boxOptions{stack: &fakestack.Options{TokenTTL: time.Hour, Now: nowFn}, now: nowFn})
	b.setDesired(faketenancy.Desired{Action: "none"})
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Zero(t, b.baoCalls("renew-self"))
	// Forty-five minutes later, under a third of the TTL is left: renew.
	later := now.Add(45 * time.Minute)
	clock = &later
	_, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, 1, b.baoCalls("renew-self"))
}

func TestCorruptStateIsMovedAside(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.publish(faketenancy.SampleApp(b.env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	require.NoError(t, os.WriteFile(b.cfg.StatePath(), []byte("{not json"), 0o600))
	out, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "applied", out.Result)
	matches, _ := filepath.Glob(b.cfg.StatePath() + ".corrupt-*")
	assert.Len(t, matches, 1)
	assert.Contains(t, b.logs.String(), "moved it aside")
	assert.False(t, out.Leased, "the state is rebuilt from the current symlink: no new lease")
}

// TestPrune keeps keep_releases releases.
func TestPrune(t *testing.T) {
	b := newBox(t, boxOptions{})
	for serial := int64(1); serial <= 4; serial++ {
		b.publish(faketenancy.SampleApp(b.env, serial))
		_, code := b.tick()
		require.Equal(t, deployd.ExitOK, code)
	}
	entries, err := os.ReadDir(b.cfg.ReleasesDir())
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Len(t, names, 2, "keep_releases: 2")
	assert.True(t, slices.Contains(names, b.live()))
}

func TestStateHoldsNoSecret(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.publish(faketenancy.SampleApp(b.env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	data, err := os.ReadFile(b.cfg.StatePath())
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(data, &st))
	assert.NotContains(t, string(data), "s3cr3t")
	tok, err := os.ReadFile(b.cfg.TokenPath())
	require.NoError(t, err)
	assert.NotContains(t, string(data), strings.TrimSpace(string(tok)))
}

// TestIdleTickRunsNoSubprocess: the docker version of the check-in is kept in the
// state for an hour, so that the timer's idle tick (a new process each minute) execs
// no docker.
func TestIdleTickRunsNoSubprocess(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.setDesired(faketenancy.Desired{Action: "none"})
	for range 3 {
		b.newAgent() // as a new process would
		_, code := b.tick()
		require.Equal(t, deployd.ExitOK, code)
	}
	assert.Len(t, b.dockerCalls("version"), 1, "docker version once for three processes")
	for _, c := range b.stack.Checkins(b.env) {
		assert.NotEmpty(t, c.Host.DockerVersion)
	}
}

// TestDiskLowIsVerifiedAgain: DISK_LOW is a refusal of the box, not of the bundle: it is
// reported, but not remembered, so that the next tick verifies the bundle again once
// the operator has freed space — without a retry from tenancy, and without a lease
// while refused.
func TestDiskLowIsVerifiedAgain(t *testing.T) {
	b := newBox(t, boxOptions{})
	bn := faketenancy.SampleApp(b.env, 1)
	bn.MinFreeMB = 1 << 40
	b.publish(bn)
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.DiskLow, out.Code)
	assert.Empty(t, b.state().Failed, "DISK_LOW is not remembered against the sha")
	downloads := b.calls("/v1/agent/bundles/")
	_, code = b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, downloads+1, b.calls("/v1/agent/bundles/"), "verified again at the next tick")
	assert.Zero(t, b.calls("/v1/agent/lease"))
	assert.Contains(t, b.logs.String(), "Free space there")
}

// TestEnvMismatchAtReportLatches: AGENT_ENV_MISMATCH on the report latches like at the
// check-in: exit 78, and the next run touches no network.
func TestEnvMismatchAtReportLatches(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.publish(faketenancy.SampleApp(b.env, 1))
	b.stack.SetFaults(faketenancy.Faults{Status: map[string]int{"report": 409}})
	_, code := b.tick()
	assert.Equal(t, deployd.ExitEnvMismatch, code)
	require.NotNil(t, b.state().EnvMismatch)
	before := len(b.stack.Requests())
	_, code = b.tick()
	assert.Equal(t, deployd.ExitEnvMismatch, code)
	assert.Len(t, b.stack.Requests(), before)
}
