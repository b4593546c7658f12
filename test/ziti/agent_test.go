package zitimesh

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// zitiBinary returns the ziti CLI to run: $ZITI_BIN, or else tools/ziti/bin/ziti of
// this repository. Without either the test is skipped with the command that builds it;
// a ZITI_BIN that is set but unusable fails the test, so that CI cannot skip silently.
func zitiBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("ZITI_BIN"); p != "" {
		st, err := os.Stat(p)
		require.NoError(tb, err, "ZITI_BIN=%s", p)
		require.False(tb, st.IsDir(), "ZITI_BIN=%s is a directory", p)
		require.NotZero(tb, st.Mode().Perm()&0o111, "ZITI_BIN=%s is not executable", p)
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "tools", "ziti", "bin", "ziti"))
	require.NoError(tb, err)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("the OpenZiti CLI is not built; run the real-mesh tests with:\n" +
			"  bash tools/ziti/build.sh && ZITI_BIN=$PWD/tools/ziti/bin/ziti go test -count=1 -v ./test/ziti/...")
	}
	return p
}

// box is one box (a testbox.Box with the fake docker) whose agent binary talks to the
// world's fakes: its config of record uses the system transport; config writes more.
type box struct {
	*testbox.Box
}

func newBox(tb testing.TB, w *world) *box {
	tb.Helper()
	return &box{Box: testbox.New(tb, testbox.Options{
		Env: envID, NoStack: true,
		Config: func(c *deployd.Config) {
			c.Tenancy = systemTenancy(w)
			c.Bao.Addr = w.bao.URL()
			c.Compose.Project = "zitimesh"
			c.Compose.HealthTimeout = deployd.Duration(30 * time.Second)
			c.Compose.KeepReleases = deployd.DefaultConfig().Compose.KeepReleases
		},
	})}
}

// newLoopBox is the box of the loop tests: bootstrapped with a fresh grant over the
// system transport on loopback, with nothing to do (desired "none").
func newLoopBox(t *testing.T, w *world) *box {
	t.Helper()
	b := newBox(t, w)
	require.NoError(t, os.WriteFile(b.Cfg.BootstrapGrant, []byte(w.bao.MintGrant(envID)+"\n"), 0o600))
	r := b.run(t, nil, "bootstrap", "--config", b.config(t, "system.yaml", systemTenancy(w)))
	require.Equal(t, 0, r.Code, "bootstrap over loopback; stderr:\n%s", r.Stderr)
	w.ten.SetDesired(envID, faketenancy.Desired{Action: "none"})
	return b
}

// sdkTenancy is the tenancy block of the sdk transport for identity and service.
func sdkTenancy(w *world, identity, service string) deployd.TenancyConfig {
	t := deployd.DefaultConfig().Tenancy
	t.Transport = "sdk"
	t.URL = "https://" + tenancyName
	t.Service = service
	t.Identity = identity
	t.CAFile = w.caFile
	t.Timeout = deployd.Duration(10 * time.Second)
	return t
}

// systemTenancy is the tenancy block of the system transport to the fake on loopback.
func systemTenancy(w *world) deployd.TenancyConfig {
	t := deployd.DefaultConfig().Tenancy
	t.Transport = "system"
	t.URL = w.tcpURL
	t.Timeout = deployd.Duration(10 * time.Second)
	return t
}

// config writes a config named name with the tenancy block and returns its path. All
// configs of a box share its state, so that they share its OpenBao token.
func (b *box) config(tb testing.TB, name string, tenancy deployd.TenancyConfig) string {
	tb.Helper()
	return b.WriteConfig(name, func(c *deployd.Config) { c.Tenancy = tenancy })
}

// result is one run of the agent binary.
type result = testprog.Result

// run runs the agent binary with args and the extra environment, and waits for it.
func (b *box) run(tb testing.TB, extraEnv []string, args ...string) result {
	tb.Helper()
	return testprog.Start(tb, testprog.Build(tb, testprog.AgentPkg), b.Dir, b.env(extraEnv), args...).Wait(tb, 2*time.Minute)
}

// command is the agent binary with a clean environment: PATH (the fake docker first),
// HOME and the fake docker's FAKE_DOCKER_*, plus extraEnv.
func (b *box) command(ctx context.Context, extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, testprog.Build(b.T, testprog.AgentPkg), args...)
	cmd.Env = b.env(extraEnv)
	cmd.Dir = b.Dir
	return cmd
}

// env is the agent's environment: the box's, HOME, then extraEnv.
func (b *box) env(extraEnv []string) []string {
	return b.ProcEnv(append([]string{"HOME=" + b.Dir}, extraEnv...)...)
}

// slogLine is a line of the agent's text log (log/slog's TextHandler).
var slogLine = regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR)([+-][0-9]+)? msg=`)

// requireSlog checks that every line of stderr is a slog record: nothing, the OpenZiti
// SDK's output above all, reaches raw stderr.
func requireSlog(tb testing.TB, stderr string) {
	tb.Helper()
	for i, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if line == "" && i == 0 {
			continue
		}
		require.Regexp(tb, slogLine, line, "stderr line %d is not a slog record", i+1)
	}
}

// requireNoSecrets checks that none of the values appears in any of the outputs.
func requireNoSecrets(tb testing.TB, r result, values ...string) {
	tb.Helper()
	for _, v := range values {
		require.NotEmpty(tb, v)
		require.NotContains(tb, r.Stderr, v, "a secret value reached stderr")
		require.NotContains(tb, r.Stdout, v, "a secret value reached stdout")
	}
}

// countingHandler counts the requests of each path that reached it.
type countingHandler struct {
	next http.Handler
	mu   sync.Mutex
	hits map[string]int
	all  atomic.Int64
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if c.hits == nil {
		c.hits = map[string]int{}
	}
	key := r.URL.Path
	if strings.HasPrefix(key, "/v1/agent/bundles/") {
		key = "/v1/agent/bundles/"
	}
	c.hits[key]++
	c.mu.Unlock()
	c.all.Add(1)
	c.next.ServeHTTP(w, r)
}

func (c *countingHandler) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[path]
}

// assertTemporary checks a run that must end on a temporary condition: exit 75, the
// message names what is wrong, every line is a slog record.
func assertTemporary(t *testing.T, r result, wants ...string) {
	t.Helper()
	assert.Equal(t, 75, r.Code, "exit code; stderr:\n%s", r.Stderr)
	for _, want := range wants {
		assert.Contains(t, r.Stderr, want)
	}
	assert.Contains(t, r.Stderr, "the next tick retries")
	requireSlog(t, r.Stderr)
}

// composeCommands returns the compose subcommand (up, down, ps, logs) of every call
// the fake docker recorded.
func composeCommands(tb testing.TB, d *fakedocker.Docker) []string {
	tb.Helper()
	calls, err := d.Calls()
	require.NoError(tb, err)
	var cmds []string
	for _, c := range calls {
		if len(c.Argv) == 0 || c.Argv[0] != "compose" {
			continue
		}
		for _, a := range c.Argv[1:] {
			if a == "up" || a == "down" || a == "ps" || a == "logs" {
				cmds = append(cmds, a)
				break
			}
		}
	}
	return cmds
}
