package zitimesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
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

// buildBinaries builds the agent and the fake docker (as "docker") into a directory
// of tb and returns it. The go build cache makes every build after the first cheap.
func buildBinaries(tb testing.TB) string {
	tb.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(tb, err, "the tests build the agent and need go on PATH")
	dir := tb.TempDir()
	for pkg, out := range map[string]string{"./cmd/monky-deployd": "monky-deployd", "./cmd/fake-docker": "docker"} {
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, out), pkg)
		cmd.Dir = filepath.Join("..", "..")
		data, err := cmd.CombinedOutput()
		require.NoError(tb, err, "go build %s:\n%s", pkg, data)
	}
	return dir
}

// box is one box's directories and the agent binary that runs for it.
type box struct {
	dir       string
	bin       string // holds monky-deployd and docker
	state     string
	deploy    string
	grant     string
	dockerLog string
	baoAddr   string
}

func newBox(tb testing.TB, baoAddr string) *box {
	tb.Helper()
	bin := buildBinaries(tb)
	dir := tb.TempDir()
	b := &box{
		dir: dir, bin: bin, baoAddr: baoAddr,
		state:     filepath.Join(dir, "state"),
		deploy:    filepath.Join(dir, "srv"),
		grant:     filepath.Join(dir, "bootstrap.jwt"),
		dockerLog: filepath.Join(dir, "docker.log"),
	}
	// The agent passes no FAKE_DOCKER_* to docker: the fake reads its record's path
	// from fake-docker.json next to itself.
	require.NoError(tb, fakedocker.Config{Log: b.dockerLog}.WriteFile(filepath.Join(bin, fakedocker.ConfigFile)))
	return b
}

// sdkTenancy is the tenancy block of the sdk transport for identity and service.
func sdkTenancy(w *world, identity, service string) string {
	return fmt.Sprintf(`  transport: sdk
  url: https://%s
  service: %s
  identity: %s
  ca_file: %s
  timeout: 10s
`, tenancyName, service, identity, w.caFile)
}

// systemTenancy is the tenancy block of the system transport to the fake on loopback.
func systemTenancy(w *world) string {
	return fmt.Sprintf("  transport: system\n  url: %s\n  timeout: 10s\n", w.tcpURL)
}

// config writes a config named name with the tenancy block and returns its path. All
// configs of a box share its state, so that they share its OpenBao token.
func (b *box) config(tb testing.TB, name, tenancy string) string {
	tb.Helper()
	p := filepath.Join(b.dir, name)
	cfg := fmt.Sprintf(`env_id: %s
deploy_dir: %s
state_dir: %s
bootstrap_grant: %s
min_free_mb: 1
tenancy:
%sbao:
  addr: %s
compose:
  project: zitimesh
  docker: %s
  health_timeout: 30s
`, envID, b.deploy, b.state, b.grant, tenancy, b.baoAddr, filepath.Join(b.bin, "docker"))
	require.NoError(tb, os.WriteFile(p, []byte(cfg), 0o600))
	return p
}

// result is one run of the agent binary.
type result struct {
	code    int
	stdout  string
	stderr  string
	elapsed time.Duration
}

// run runs the agent binary with args and the extra environment, and waits for it.
func (b *box) run(tb testing.TB, extraEnv []string, args ...string) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := b.command(ctx, extraEnv, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		require.NoError(tb, err, "running monky-deployd %s", strings.Join(args, " "))
	}
	return r
}

// command is the agent binary with a clean environment: PATH (the fake docker first),
// HOME and FAKE_DOCKER_LOG, plus extraEnv.
func (b *box) command(ctx context.Context, extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "monky-deployd"), args...)
	cmd.Env = append([]string{
		"PATH=" + b.bin + ":/usr/bin:/bin",
		"HOME=" + b.dir,
		"FAKE_DOCKER_LOG=" + b.dockerLog,
	}, extraEnv...)
	cmd.Dir = b.dir
	return cmd
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
		require.NotContains(tb, r.stderr, v, "a secret value reached stderr")
		require.NotContains(tb, r.stdout, v, "a secret value reached stdout")
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
	assert.Equal(t, 75, r.code, "exit code; stderr:\n%s", r.stderr)
	for _, want := range wants {
		assert.Contains(t, r.stderr, want)
	}
	assert.Contains(t, r.stderr, "the next tick retries")
	requireSlog(t, r.stderr)
}

// composeCommands returns the compose subcommand (up, down, ps, logs) of every call
// the fake docker recorded.
func composeCommands(tb testing.TB, path string) []string {
	tb.Helper()
	calls, err := fakedocker.ReadCalls(path)
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
