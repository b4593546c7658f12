package deployd_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
)

// box is one box under test: the fakes, the fake docker, a config built from
// DefaultConfig with its directories in a temporary directory, and an in-process agent
// whose log goes to a buffer.
type box struct {
	t      *testing.T
	env    string
	dir    string
	stack  *deploydtest.Stack
	docker *fakedockertest.Docker
	cfg    deployd.Config
	agent  *deployd.Agent
	logs   *syncBuffer
	// rt, when set, sees every request to tenancy before it is sent and may rewrite
	// the response.
	rt  *hookTransport
	now func() time.Time
}

type boxOptions struct {
	env     string
	script  *fakedockertest.Script
	stack   *fakestack.Options
	noGrant bool
	// config, when set, changes the box's config before the agent is built.
	config func(*deployd.Config)
	// now is the clock of the agent (and, through stack, of the fakes).
	now func() time.Time
}

func newBox(t *testing.T, o boxOptions) *box {
	t.Helper()
	if o.env == "" {
		o.env = "env-dev-01"
	}
	b := &box{t: t, env: o.env, dir: t.TempDir(), logs: &syncBuffer{}}
	b.stack = deploydtest.NewStack(t, o.stack)
	if o.script == nil {
		// A script file always exists, so that SetScript reaches the agent's docker.
		o.script = &fakedockertest.Script{}
	}
	b.docker = fakedockertest.Install(t, o.script)
	b.writeConfig(o.env, o.config)
	b.rt = &hookTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	b.now = o.now
	b.newAgent()
	if !o.noGrant {
		b.placeGrant()
	}
	b.stack.PutSecret(o.env, "db", map[string]string{"password": "s3cr3t-db-password"})
	return b
}

// writeConfig sets b.cfg: the defaults, the box's directories and fakes, and edit.
func (b *box) writeConfig(env string, edit func(*deployd.Config)) {
	b.t.Helper()
	c := deployd.DefaultConfig()
	c.EnvID = env
	c.DeployDir = filepath.Join(b.dir, "srv")
	c.StateDir = filepath.Join(b.dir, "state")
	c.BootstrapGrant = filepath.Join(b.dir, "grant.jwt")
	c.MinFreeMB = 1
	c.Tenancy.Transport = "system"
	c.Tenancy.URL = b.stack.TenancyURL()
	c.Tenancy.Timeout = deployd.Duration(5 * time.Second)
	c.Bao.Addr = b.stack.BaoAddr()
	c.Compose.Project = "monky"
	c.Compose.Docker = b.docker.Path
	c.Compose.HealthTimeout = deployd.Duration(3 * time.Second)
	c.Compose.KeepReleases = 2
	if edit != nil {
		edit(&c)
	}
	require.NoError(b.t, c.Validate())
	b.cfg = c
}

func (b *box) newAgent() {
	b.t.Helper()
	if b.agent != nil {
		_ = b.agent.Close()
	}
	a, err := deployd.New(context.Background(), b.cfg, deployd.Options{
		Logger:      slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TenancyHTTP: &http.Client{Transport: b.rt},
		DockerEnv:   b.docker.Env(),
		Hostname:    "box-under-test",
		HealthPoll:  10 * time.Millisecond,
		Now:         b.now,
	})
	require.NoError(b.t, err)
	b.agent = a
	b.t.Cleanup(func() { _ = a.Close() })
}

func (b *box) placeGrant() string {
	b.t.Helper()
	g := b.stack.Grant(b.env)
	require.NoError(b.t, os.WriteFile(b.cfg.BootstrapGrant, []byte(g+"\n"), 0o600))
	return g
}

func (b *box) tick() (deployd.Outcome, int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := b.agent.Tick(ctx)
	code := deployd.ExitCode(err)
	b.t.Logf("tick: action=%s result=%s code=%s leased=%t exit=%d err=%v", out.Action, out.Result, out.Code, out.Leased, code, err)
	return out, code
}

func (b *box) publish(bn faketenancy.BundleSpec) string {
	b.t.Helper()
	sha, _ := b.stack.PublishBundle(b.env, tarball(b.t, bn, true))
	return sha
}

// tarball builds the bundle of spec, gzip-compressed when gz.
func tarball(tb testing.TB, spec faketenancy.BundleSpec, gz bool) []byte {
	tb.Helper()
	spec.Gzip = gz
	return deploydtest.MakeBundle(tb, spec).Data
}

func (b *box) setDesired(d faketenancy.Desired) { b.stack.SetDesired(b.env, d) }

func (b *box) lastReport() faketenancy.Report {
	b.t.Helper()
	reps := b.stack.Reports(b.env)
	require.NotEmpty(b.t, reps, "no report arrived")
	return reps[len(reps)-1]
}

// calls counts the tenancy requests whose path starts with prefix.
func (b *box) calls(prefix string) int {
	n := 0
	for _, r := range b.stack.Requests() {
		if strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// baoCalls counts the OpenBao requests whose path contains part.
func (b *box) baoCalls(part string) int {
	n := 0
	for _, r := range b.stack.BaoRequests() {
		if strings.Contains(r.Path, part) {
			n++
		}
	}
	return n
}

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

// dockerCalls returns the argv of every fake docker call that contains word.
func (b *box) dockerCalls(word string) [][]string {
	var out [][]string
	for _, c := range b.docker.Calls() {
		for _, a := range c.Argv {
			if a == word {
				out = append(out, c.Argv)
				break
			}
		}
	}
	return out
}

func projectDir(argv []string) string {
	for i, a := range argv {
		if a == "--project-directory" && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe for the agent's log handler.
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

// hookTransport lets a test rewrite tenancy's answers: after(req, resp) may replace
// the response.
type hookTransport struct {
	base  http.RoundTripper
	mu    sync.Mutex
	after func(*http.Request, *http.Response) *http.Response
}

func (h *hookTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(req)
	h.mu.Lock()
	after := h.after
	h.mu.Unlock()
	if err != nil || after == nil {
		return resp, err
	}
	return after(req, resp), nil
}

func (h *hookTransport) set(f func(*http.Request, *http.Response) *http.Response) {
	h.mu.Lock()
	h.after = f
	h.mu.Unlock()
}

// rawTar builds a tar from entries, for bundles a BundleSpec cannot express.
type entry struct {
	hdr  tar.Header
	body string
}

func rawTar(t *testing.T, manifest map[string]any, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	mj, err := json.Marshal(manifest)
	require.NoError(t, err)
	all := append([]entry{{hdr: tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Mode: 0o644}, body: string(mj)}}, entries...)
	for _, e := range all {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		require.NoError(t, w.WriteHeader(&h))
		if h.Typeflag == tar.TypeReg {
			_, err := io.WriteString(w, e.body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}
