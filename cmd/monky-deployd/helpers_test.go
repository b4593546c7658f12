package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/admin"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
)

// testCommit is what the test build of the binary links as main.commit.
const testCommit = "e2e0123abcd"

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// TestMain removes the binary built for the end-to-end tests when they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// agentBinary builds the real monky-deployd once per test process, exactly as it is
// shipped (CGO off, the commit set with -ldflags), and returns its path.
func agentBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		goTool, err := goToolPath()
		if err != nil {
			binErr = err
			return
		}
		binDir, binErr = os.MkdirTemp("", "monky-deployd-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "monky-deployd")
		cmd := exec.Command(goTool, "build", "-ldflags", "-X main.commit="+testCommit, "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/monky-deployd: %w: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// goToolPath finds the go tool: the one on PATH (go test puts its own there), else the
// one under $GOROOT.
func goToolPath() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no go tool on PATH or under $GOROOT")
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
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		rec.add(b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.add(b)
		r.Body = io.NopCloser(bytes.NewReader(b))
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// boxOpts configure newBox.
type boxOpts struct {
	env    string
	script *fakedockertest.Script
	// nextCheckin is next_checkin_s of tenancy's answers; default 60s.
	nextCheckin time.Duration
	// record puts recording proxies in front of both fakes.
	record bool
	// healthTimeout is compose.health_timeout; default 3s.
	healthTimeout string
	noGrant       bool
}

// box is one box driven through the real binary: the fake tenancy and OpenBao, the
// fake docker, a config in a temporary directory.
type box struct {
	t       *testing.T
	env     string
	dir     string
	bao     *fakebao.Server
	ten     *faketenancy.Server
	docker  *fakedockertest.Docker
	cfgPath string
	cfg     deployd.Config
	rec     *recorder
	grants  []string // every bootstrap grant the test placed
}

func newBox(t *testing.T, o boxOpts) *box {
	t.Helper()
	agentBinary(t)
	if o.env == "" {
		o.env = "env-dev-01"
	}
	if o.script == nil {
		o.script = &fakedockertest.Script{}
	}
	if o.healthTimeout == "" {
		o.healthTimeout = "3s"
	}
	b := &box{t: t, env: o.env, dir: t.TempDir()}
	b.bao = fakebao.New(fakebao.Options{})
	t.Cleanup(b.bao.Close)
	b.ten = faketenancy.New(faketenancy.Options{Authority: b.bao, NextCheckin: o.nextCheckin})
	t.Cleanup(b.ten.Close)
	b.docker = fakedockertest.Install(t, o.script)
	tenURL, baoURL := b.ten.URL(), b.bao.URL()
	if o.record {
		b.rec = &recorder{}
		tenURL = recordingProxy(t, tenURL, b.rec)
		baoURL = recordingProxy(t, baoURL, b.rec)
	}
	b.cfgPath = filepath.Join(b.dir, "config.yaml")
	cfg := fmt.Sprintf(`env_id: %s
deploy_dir: %s
state_dir: %s
bootstrap_grant: %s
min_free_mb: 1
tenancy:
  transport: system
  url: %s
  timeout: 5s
bao:
  addr: %s
compose:
  project: monky
  docker: %s
  health_timeout: %s
  keep_releases: 3
`, o.env, filepath.Join(b.dir, "srv"), filepath.Join(b.dir, "state"), filepath.Join(b.dir, "grant.jwt"),
		tenURL, baoURL, b.docker.Path, o.healthTimeout)
	require.NoError(t, os.WriteFile(b.cfgPath, []byte(cfg), 0o600))
	c, err := deployd.LoadConfig(b.cfgPath)
	require.NoError(t, err)
	b.cfg = c
	if !o.noGrant {
		b.placeGrant()
	}
	b.bao.PutSecret(o.env, "db", map[string]string{"password": "s3cr3t-db-password"})
	return b
}

func (b *box) placeGrant() {
	b.t.Helper()
	g := b.bao.MintGrant(b.env)
	b.grants = append(b.grants, g)
	require.NoError(b.t, os.WriteFile(b.cfg.BootstrapGrant, []byte(g+"\n"), 0o600))
}

// foreignToken is a live token of another environment.
func (b *box) foreignToken(envID string) string {
	b.t.Helper()
	tok, err := admin.Login(context.Background(), http.DefaultClient, b.bao.URL(), b.bao.MintGrant(envID))
	require.NoError(b.t, err)
	return tok
}

// publish publishes bn for the box's env and makes it desired.
func (b *box) publish(bn faketenancy.BundleSpec) string {
	b.t.Helper()
	sha, _, err := b.ten.PublishBundle(b.env, tarball(b.t, bn, true))
	require.NoError(b.t, err)
	return sha
}

// tarball builds the bundle of spec, gzip-compressed when gz.
func tarball(tb testing.TB, spec faketenancy.BundleSpec, gz bool) []byte {
	tb.Helper()
	spec.Gzip = gz
	return deploydtest.MakeBundle(tb, spec).Data
}

func (b *box) setDesired(d faketenancy.Desired) { b.ten.SetDesired(b.env, d) }

// procEnv is the process environment of the binary: a PATH that finds the fake
// docker, the FAKE_DOCKER_* variables, and extra.
func (b *box) procEnv(extra ...string) []string {
	env := []string{
		"PATH=" + b.docker.Dir + ":/usr/bin:/bin",
		fakedocker.EnvLog + "=" + b.docker.Log,
		fakedocker.EnvState + "=" + b.docker.State,
		fakedocker.EnvScript + "=" + b.docker.Script,
		// The agent must not pass these to docker, nor be confused by them.
		"VAULT_TOKEN=should-never-be-used",
		"SOME_UNRELATED=value",
	}
	return append(env, extra...)
}

// result is one finished run of the binary.
type result struct {
	code   int
	stdout string
	stderr string
}

// proc is a started run of the binary.
type proc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	res    result
}

// start starts the binary with args (the config is appended for the commands that
// take one) and the box's process environment plus extraEnv.
func (b *box) start(args []string, extraEnv ...string) *proc {
	b.t.Helper()
	cmd := exec.Command(agentBinary(b.t), args...)
	cmd.Env = b.procEnv(extraEnv...)
	cmd.Dir = b.dir
	// Its own process group, so that a kill reaches a docker child too, as systemd's
	// KillMode=control-group does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	require.NoError(b.t, cmd.Start())
	go func() {
		err := cmd.Wait()
		p.res = result{code: cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.code = -int(ws.Signal())
		}
		_ = err
		close(p.done)
	}()
	b.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// wait waits for the run to end (at most d) and returns its result.
func (p *proc) wait(t testing.TB, d time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(d):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Fatalf("the run did not end within %s; stderr:\n%s", d, p.res.stderr)
		return result{}
	}
}

// kill sends SIGKILL to the whole process group and waits for the run to end.
func (p *proc) kill(t testing.TB) result {
	t.Helper()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return p.res
}

// run runs the binary to its end.
func (b *box) run(args []string, extraEnv ...string) result {
	b.t.Helper()
	res := b.start(args, extraEnv...).wait(b.t, 60*time.Second)
	b.t.Logf("monky-deployd %s → exit %d", strings.Join(args, " "), res.code)
	return res
}

// tick runs `monky-deployd run --config <box>` plus extra flags.
func (b *box) tick(extra ...string) result {
	b.t.Helper()
	return b.run(append([]string{"run", "--config", b.cfgPath}, extra...))
}

// live is the sha `current` points to, "" when there is none.
func (b *box) live() string {
	target, err := os.Readlink(b.cfg.CurrentLink())
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

func (b *box) state() deployd.State {
	b.t.Helper()
	st, err := deployd.ReadState(b.cfg)
	require.NoError(b.t, err)
	return st
}

// tenancyCalls counts the requests to the fake tenancy whose path starts with prefix.
func (b *box) tenancyCalls(prefix string) int {
	n := 0
	for _, r := range b.ten.Requests() {
		if strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// dockerCalls returns the fake docker calls whose argv holds word.
func (b *box) dockerCalls(word string) []fakedockertest.Call {
	var out []fakedockertest.Call
	for _, c := range b.docker.Calls() {
		for _, a := range c.Argv {
			if a == word {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// lastReport is the newest report the fake tenancy received.
func (b *box) lastReport() faketenancy.Report {
	b.t.Helper()
	reps := b.ten.Reports(b.env)
	require.NotEmpty(b.t, reps, "no report arrived")
	return reps[len(reps)-1]
}

// waitFor polls cond every 5ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
