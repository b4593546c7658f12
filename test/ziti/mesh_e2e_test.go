package zitimesh

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// plantedSecret is the OpenBao value of DB_PASSWORD; it must reach the release's .env
// and nothing else.
const plantedSecret = "zitimesh-planted-db-password-5f2c"

// TestAgentOverMesh runs the agent binary with transport sdk through a real controller
// and edge router. The subtests run in order on one box and one mesh; the last one
// stops the controller.
func TestAgentOverMesh(t *testing.T) {
	testprog.SkipIfShort(t)
	zitiBin := zitiBinary(t)
	w := newWorld(t, zitiBin, t.TempDir())
	b := newBox(t, w)
	good := b.config(t, "sdk.yaml", sdkTenancy(w, w.ids[boxID], tenancyService))
	var grant string

	t.Run("bootstrap", func(t *testing.T) {
		w.bao.PutSecret(envID, "db", map[string]string{"password": plantedSecret})
		grant = w.bao.MintGrant(envID)
		require.NoError(t, os.WriteFile(b.Cfg.BootstrapGrant, []byte(grant+"\n"), 0o600))

		r := b.run(t, nil, "bootstrap", "--config", good)
		require.Equal(t, 0, r.Code, "stderr:\n%s", r.Stderr)
		assert.Contains(t, r.Stderr, "bootstrap confirmed by a check-in")
		requireSlog(t, r.Stderr)
		require.NoFileExists(t, b.Cfg.BootstrapGrant, "the grant is consumed")
		require.FileExists(t, filepath.Join(b.Cfg.StateDir, "bao.token"))
		assert.Len(t, w.ten.Checkins(envID), 1)
		assert.Equal(t, 1, w.meshHits.count("/v1/agent/checkin"), "the check-in went through the mesh")
		assert.Zero(t, w.tcpHits.all.Load())
		requireNoSecrets(t, r, grant)
	})

	t.Run("apply with secrets", func(t *testing.T) {
		app := faketenancy.SampleApp(envID, 1)
		app.Gzip = true
		sha, serial, err := w.ten.PublishBundle(envID, deploydtest.MakeBundle(t, app).Data)
		require.NoError(t, err)
		r := b.run(t, nil, "run", "--config", good)
		require.Equal(t, 0, r.Code, "stderr:\n%s", r.Stderr)
		requireSlog(t, r.Stderr)

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		rep, err := w.ten.WaitReport(ctx, envID, 1)
		require.NoError(t, err)
		assert.Equal(t, "applied", rep.Result)
		assert.Equal(t, sha, rep.SHA)
		assert.Equal(t, serial, rep.Serial)
		assert.Len(t, w.ten.Leases(envID), 1)
		assert.Equal(t, 1, w.meshHits.count("/v1/agent/bundles/"), "the bundle came through the mesh")
		assert.Equal(t, 1, w.meshHits.count("/v1/agent/lease"), "the lease came through the mesh")
		assert.Equal(t, 1, w.meshHits.count("/v1/agent/report"), "the report went through the mesh")
		assert.Zero(t, w.tcpHits.all.Load())
		assert.Contains(t, composeCommands(t, b.Docker), "up")

		env, err := os.ReadFile(filepath.Join(b.Cfg.DeployDir, "current", ".env"))
		require.NoError(t, err)
		assert.Contains(t, string(env), plantedSecret, "the secret reached the release's .env")
		token := readToken(t, b)
		requireNoSecrets(t, r, plantedSecret, token)
	})

	t.Run("none tick", func(t *testing.T) {
		w.ten.SetDesired(envID, faketenancy.Desired{Action: "none"})
		checkins, reports, leases := len(w.ten.Checkins(envID)), len(w.ten.Reports(envID)), len(w.ten.Leases(envID))
		r := b.run(t, nil, "run", "--config", good)
		require.Equal(t, 0, r.Code, "stderr:\n%s", r.Stderr)
		assert.Contains(t, r.Stderr, "action=none")
		requireSlog(t, r.Stderr)
		assert.Len(t, w.ten.Checkins(envID), checkins+1)
		assert.Len(t, w.ten.Reports(envID), reports, "a none tick reports nothing")
		assert.Len(t, w.ten.Leases(envID), leases, "a none tick takes no lease")
		t.Logf("none tick over the mesh, whole process: %s", r.Elapsed.Round(time.Millisecond))
	})

	t.Run("debug log: slog only, no secret, no OpenZiti token", func(t *testing.T) {
		// The agent caps logrus at info because the OpenZiti SDK logs its API session
		// and service session tokens (JWTs) at debug level; with the agent at debug
		// every line must still be a slog record and carry neither a secret of the
		// agent nor a token of the SDK.
		r := b.run(t, []string{"MONKY_DEPLOYD_DEBUG=1"}, "run", "--config", good)
		require.Equal(t, 0, r.Code, "stderr:\n%s", r.Stderr)
		requireSlog(t, r.Stderr)
		assert.Contains(t, r.Stderr, "transport: OpenZiti dial")
		requireNoSecrets(t, r, plantedSecret, readToken(t, b), grant)
		assert.NotRegexp(t, jwtShape, r.Stderr, "a JWT (an OpenZiti session token?) reached the log")
	})

	t.Run("no Dial policy", func(t *testing.T) {
		cfg := b.config(t, "nodial.yaml", sdkTenancy(w, w.ids[noDialBoxID], tenancyService))
		r := b.run(t, nil, "run", "--config", cfg)
		assertTemporary(t, r, `dial OpenZiti service \"monky-tenancy\"`, "no Dial policy")
	})

	t.Run("service that does not exist", func(t *testing.T) {
		cfg := b.config(t, "missing.yaml", sdkTenancy(w, w.ids[boxID], "monky-tenancy-typo"))
		r := b.run(t, nil, "run", "--config", cfg)
		assertTemporary(t, r, `dial OpenZiti service \"monky-tenancy-typo\"`, "sees no such service")
	})

	t.Run("frozen controller", func(t *testing.T) {
		// A controller that accepts connections but never answers: the tick gives up
		// and is temporary. The transport's dial timeout is four fifths of
		// tenancy.timeout (10s), so the dial ends first and its error names the
		// OpenZiti service, rather than the check-in call's bare deadline.
		require.NoError(t, w.mesh.cmd.Process.Signal(syscall.SIGSTOP))
		r := b.run(t, nil, "run", "--config", good)
		require.NoError(t, w.mesh.cmd.Process.Signal(syscall.SIGCONT))
		assertTemporary(t, r, "tenancy unavailable", "code=UNAVAILABLE")
		assert.Contains(t, r.Stderr, `dial OpenZiti service \"monky-tenancy\"`, "the message names the service")
		assert.Contains(t, r.Stderr, "no connection within", "the message says the dial timed out")
		assert.Less(t, r.Elapsed, 20*time.Second, "the 10s timeout bounds the tick")
		t.Logf("frozen controller: exit %d after %s: %s", r.Code, r.Elapsed.Round(time.Millisecond), firstLine(r.Stderr))
	})

	t.Run("back to the good config", func(t *testing.T) {
		r := b.run(t, nil, "run", "--config", good)
		require.Equal(t, 0, r.Code, "stderr:\n%s", r.Stderr)
	})

	t.Run("run --loop keeps one context, then the controller stops", func(t *testing.T) {
		testLoop(t, w, b)
	})

	t.Run("stopped controller", func(t *testing.T) {
		r := b.run(t, nil, "run", "--config", good)
		assertTemporary(t, r, "cannot authenticate with the OpenZiti controller")
		assert.Less(t, r.Elapsed, 15*time.Second, "a stopped controller costs at most the 10s timeout")
		t.Logf("stopped controller: exit %d after %s", r.Code, r.Elapsed.Round(time.Millisecond))
	})
}

// jwtShape matches a JWT: the OpenZiti controller's API and service session tokens are
// JWTs when the SDK authenticates with OIDC, as it does against ziti v1.7.2.
var jwtShape = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.`)

// readToken returns the box's stored OpenBao token.
func readToken(tb testing.TB, b *box) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(b.Cfg.StateDir, "bao.token"))
	require.NoError(tb, err)
	tok := strings.TrimSpace(string(data))
	require.NotEmpty(tb, tok)
	return tok
}

// testLoop runs `run --loop` at debug level until it has ticked five times and checks
// that it dialed tenancy once for all of them (one OpenZiti context, one connection).
// Then it stops the mesh under the running loop: the next tick must end with 75, and
// what the SDK logs about its lost edge router must come out as slog records.
func testLoop(t *testing.T, w *world, b *box) {
	cfg := b.config(t, "loop.yaml", sdkTenancy(w, w.ids[loopBoxID], tenancyService))
	l := startLoop(t, b, cfg, filepath.Join(t.TempDir(), "loop.log"), "MONKY_DEPLOYD_DEBUG=1")
	const ticks = 5
	l.waitTicks(t, ticks, 0, ticks*time.Minute)
	l.mu.Lock()
	durations := make([]string, 0, ticks)
	for _, r := range l.ticks[:ticks] {
		durations = append(durations, r.duration.String())
	}
	dials := countMatching(l.lines, `msg="transport: OpenZiti dial"`)
	l.mu.Unlock()
	t.Logf("run --loop tick durations over the mesh: %s", strings.Join(durations, " "))
	assert.Equal(t, 1, dials, "%d ticks of one loop dial tenancy once", ticks)

	w.mesh.stop()
	l.waitTicks(t, ticks, 1, time.Minute)
	l.mu.Lock()
	for _, r := range l.ticks {
		if !r.ok {
			t.Logf("loop tick after the controller stopped: %s", r.line)
			break
		}
	}
	l.mu.Unlock()

	require.NoError(t, l.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-l.done:
	case <-time.After(time.Minute):
		t.Fatalf("the loop did not stop within a minute of SIGTERM; stderr:\n%s", l.tail(40))
	}
	require.NoError(t, l.err, "the loop stops with 0 on SIGTERM")
	all := l.all()
	requireSlog(t, all)
	assert.Regexp(t, sdkRecord, all, "no record of the OpenZiti SDK reached the log; stderr:\n%s", all)
	t.Logf("an OpenZiti SDK record, as the agent logged it: %s", sdkRecord.FindString(all))
	assert.NotRegexp(t, jwtShape, all, "a JWT (an OpenZiti session token?) reached the log")
}

// firstLine returns the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// countMatching counts the lines that contain sub.
func countMatching(lines []string, sub string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// sdkRecord matches a record of the OpenZiti SDK routed from logrus into slog: the SDK
// tags what it logs about an edge router with the router's name (the quickstart's
// router is router-quickstart).
var sdkRecord = regexp.MustCompile(`(?m)^time=\S+ level=(INFO|WARN|ERROR) msg=.*router-quickstart`)
