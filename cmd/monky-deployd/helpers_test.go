package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// testCommit is what the test build of the binary links as main.commit.
const testCommit = "e2e0123abcd"

// TestMain removes the binary built for the end-to-end tests when they are done.
func TestMain(m *testing.M) { os.Exit(testprog.Run(m)) }

// agentFlags are the go build flags of the agent binary: the commit set with -ldflags.
var agentFlags = []string{"-ldflags", "-X main.commit=" + testCommit}

// agentBinary builds the real monky-deployd once per test process, exactly as it is
// shipped (CGO off, the commit set with -ldflags), and returns its path. Under go test
// -short it skips the test (testprog.Build).
func agentBinary(t testing.TB) string {
	t.Helper()
	return testprog.Build(t, testprog.AgentPkg, agentFlags...)
}

// readFile is the content of the file at p, which must read.
func readFile(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	return data
}

// recorder keeps every request and response body that passed a recording proxy, so
// that a test learns every token and grant that ever existed on the wire.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) add(b []byte) {
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
}

var credentialRE = regexp.MustCompile(`"(client_token|grant|jwt|secret_id|token|id)"\s*:\s*"([^"]{16,})"`)

// credentials returns every token and grant seen in a body: login answers
// (client_token), lookups (id), leases (grant) and login requests (jwt).
func (r *recorder) credentials() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, b := range r.bodies {
		for _, m := range credentialRE.FindAllStringSubmatch(b, -1) {
			if !seen[m[2]] {
				seen[m[2]] = true
				out = append(out, m[2])
			}
		}
	}
	return out
}

// recordingProxy serves a reverse proxy to target on loopback and records bodies.
func recordingProxy(t *testing.T, target string, rec *recorder) string {
	t.Helper()
	return proxyWith(t, target, func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		rec.add(b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}, func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.add(b)
		r.Body = io.NopCloser(bytes.NewReader(b))
	})
}

// proxyWith serves a reverse proxy to target on loopback, and returns its URL: every
// request passes through request first (when not nil), every answer through modify.
func proxyWith(t *testing.T, target string, modify func(*http.Response) error, request func(*http.Request)) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = modify
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if request != nil {
			request(r)
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// boxOpts configure newBox.
type boxOpts struct {
	env    string
	script *fakedocker.Script
	// nextCheckin is next_checkin_s of tenancy's answers; default 60s.
	nextCheckin time.Duration
	// record puts recording proxies in front of both fakes.
	record bool
	// healthTimeout is compose.health_timeout; default 3s.
	healthTimeout string
	noGrant       bool
}

// box is one box driven through the real binary (built at its first run; under -short
// that run skips the test) or Main in-process: a testbox.Box (the fake tenancy and
// OpenBao, the fake docker, a config in a temporary directory) that keeps three
// releases.
type box struct {
	*testbox.Box
	rec *recorder
}

func newBox(t *testing.T, o boxOpts) *box {
	t.Helper()
	health := 3 * time.Second
	if o.healthTimeout != "" {
		d, err := time.ParseDuration(o.healthTimeout)
		require.NoError(t, err)
		health = d
	}
	b := &box{Box: testbox.New(t, testbox.Options{
		Env: o.env, Script: o.script, NoGrant: o.noGrant, BuildFlags: agentFlags,
		Stack: &fakestack.Options{NextCheckin: o.nextCheckin},
		Config: func(c *deployd.Config) {
			c.Compose.HealthTimeout = deployd.Duration(health)
			c.Compose.KeepReleases = 3
		},
	})}
	if o.record {
		b.rec = &recorder{}
		tenURL := recordingProxy(t, b.Stack.Tenancy.URL(), b.rec)
		baoURL := recordingProxy(t, b.Stack.Bao.URL(), b.rec)
		b.Configure(func(c *deployd.Config) { c.Tenancy.URL, c.Bao.Addr = tenURL, baoURL })
	}
	return b
}

// placeForeignToken writes, as the box's token file, a live token of env-dev-02:
// the box's runs latch AGENT_ENV_MISMATCH.
func (b *box) placeForeignToken() {
	b.T.Helper()
	tok, err := b.Stack.Login(b.T.Context(), "env-dev-02")
	require.NoError(b.T, err)
	require.NoError(b.T, os.MkdirAll(b.Cfg.StateDir, 0o700))
	require.NoError(b.T, os.WriteFile(b.Cfg.TokenPath(), []byte(tok+"\n"), 0o600))
}

// procEnv is the process environment of the binary: a PATH that finds the fake
// docker, the FAKE_DOCKER_* variables, and extra.
func (b *box) procEnv(extra ...string) []string {
	// The agent must not pass these to docker, nor be confused by them.
	return b.ProcEnv(append([]string{"VAULT_TOKEN=should-never-be-used", "SOME_UNRELATED=value"}, extra...)...)
}

// result is one finished run of the binary.
type result = testprog.Result

// start starts the binary with args (the config is appended for the commands that
// take one) and the box's process environment plus extraEnv.
func (b *box) start(args []string, extraEnv ...string) *testprog.Proc {
	b.T.Helper()
	return testprog.Start(b.T, agentBinary(b.T), b.Dir, b.procEnv(extraEnv...), args...)
}

// run runs the binary to its end.
func (b *box) run(args []string, extraEnv ...string) result {
	b.T.Helper()
	res := b.start(args, extraEnv...).Wait(b.T, 60*time.Second)
	b.T.Logf("monky-deployd %s → exit %d", strings.Join(args, " "), res.Code)
	return res
}

// runExit runs the binary to its end, which must exit with code.
func (b *box) runExit(code int, args []string, extraEnv ...string) result {
	b.T.Helper()
	res := b.run(args, extraEnv...)
	require.Equal(b.T, code, res.Code, res.Stderr)
	return res
}

// tick runs `monky-deployd run --config <box>` plus extra flags.
func (b *box) tick(extra ...string) result {
	b.T.Helper()
	return b.run(append([]string{"run", "--config", b.CfgPath}, extra...))
}

// tickExit is tick, which must exit with code.
func (b *box) tickExit(code int, extra ...string) result {
	b.T.Helper()
	return b.runExit(code, append([]string{"run", "--config", b.CfgPath}, extra...))
}
