package testbox

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// DefaultEnv is the environment of a box whose Options name none.
const DefaultEnv = "env-dev-01"

// DefaultSecret is the value of the secret db/password that New plants.
const DefaultSecret = "s3cr3t-db-password"

// Options configure New. The zero value is a box of DefaultEnv on the fakes and the
// fake docker, with a grant placed and DefaultSecret planted.
type Options struct {
	// Env is the box's environment; default DefaultEnv.
	Env string
	// Stack are the fakes' options; nil means their defaults. Their Docker is the
	// box's to set (Script, RealDocker).
	Stack *fakestack.Options
	// SharedStack, when set, are the fakes the box uses instead of starting its own:
	// several boxes (of several environments) on one tenancy and one OpenBao, as a
	// fleet's or the soak's, each with a fake docker of its own. Stack is then
	// ignored, and the box does not close them.
	SharedStack *fakestack.Stack
	// NoStack starts no fakes: Config must point the box at tenancy and OpenBao.
	NoStack bool
	// Script is the fake docker's script; nil is an empty one (every command
	// succeeds), so that SetScript always reaches the docker of an agent.
	Script *fakedocker.Script
	// RealDocker installs no fake docker: compose.docker is "docker" from PATH.
	RealDocker bool
	// NoGrant places no bootstrap grant.
	NoGrant bool
	// Secret is the value planted at db/password; default DefaultSecret.
	Secret string
	// Binary is the program that Start runs; default the agent, built (by the first
	// Start, so that a box whose test never runs it builds nothing) with BuildFlags.
	Binary string
	// BuildFlags are the extra go build flags of the agent that Start builds when
	// Binary is empty.
	BuildFlags []string
	// Config changes the config after the box's own settings, before it is validated
	// and written.
	Config func(*deployd.Config)
}

// Box is one box under test: a temporary directory holding deploy_dir (srv),
// state_dir (state), the grant (grant.jwt) and the config (config.yaml); the fakes;
// the fake docker.
type Box struct {
	// T is the test the box belongs to.
	T testing.TB
	// Env is the box's environment.
	Env string
	// Dir is the box's directory.
	Dir string
	// Stack are the fakes (Options.SharedStack, or the box's own); nil with
	// Options.NoStack.
	Stack *fakestack.Stack
	// Docker is the box's fake docker (Stack.Docker when the box started its own
	// stack); nil with Options.RealDocker.
	Docker *fakedocker.Docker
	// Cfg is the box's config, as CfgPath holds it.
	Cfg deployd.Config
	// CfgPath is the config file the binary reads.
	CfgPath string
	// Grants are the bootstrap grants PlaceGrant placed, oldest first.
	Grants []string
	// Logs receives the log of the agents NewAgent builds (JSON, debug).
	Logs *testprog.SyncBuffer

	bin   string
	flags []string
}

// New builds a box for tb. Its fakes and docker are removed by tb.Cleanup.
func New(tb testing.TB, o Options) *Box {
	tb.Helper()
	if o.Env == "" {
		o.Env = DefaultEnv
	}
	if o.Secret == "" {
		o.Secret = DefaultSecret
	}
	b := &Box{T: tb, Env: o.Env, Dir: tb.TempDir(), Logs: &testprog.SyncBuffer{}, bin: o.Binary, flags: o.BuildFlags}
	b.CfgPath = filepath.Join(b.Dir, "config.yaml")
	var dockerOpts *fakedocker.Options
	if !o.RealDocker {
		dockerOpts = &fakedocker.Options{Script: o.Script}
		if o.Script == nil {
			dockerOpts.Script = &fakedocker.Script{}
		}
	}
	switch {
	case o.NoStack:
	case o.SharedStack != nil:
		b.Stack = o.SharedStack
	default:
		var so fakestack.Options
		if o.Stack != nil {
			so = *o.Stack
		}
		so.Docker = dockerOpts
		b.Stack = deploydtest.NewStack(tb, &so)
		b.Docker = b.Stack.Docker
	}
	docker := "docker"
	if dockerOpts != nil {
		if b.Docker == nil {
			b.Docker = deploydtest.NewDocker(tb, dockerOpts)
		}
		docker = b.Docker.Path
	}
	c := deployd.DefaultConfig()
	c.EnvID = o.Env
	c.DeployDir = filepath.Join(b.Dir, "srv")
	c.StateDir = filepath.Join(b.Dir, "state")
	c.BootstrapGrant = filepath.Join(b.Dir, "grant.jwt")
	c.MinFreeMB = 1
	c.Tenancy.Transport = "system"
	c.Tenancy.Timeout = deployd.Duration(5 * time.Second)
	if b.Stack != nil {
		c.Tenancy.URL = b.Stack.Tenancy.URL()
		c.Bao.Addr = b.Stack.Bao.URL()
	}
	c.Compose.Project = "monky"
	c.Compose.Docker = docker
	c.Compose.HealthTimeout = deployd.Duration(3 * time.Second)
	c.Compose.KeepReleases = 2
	c.Holds.Dir = filepath.Join(b.Dir, "hold")
	check(tb, os.MkdirAll(c.Holds.Dir, 0o770))
	b.Cfg = c
	b.Configure(o.Config)
	if b.Stack != nil {
		if !o.NoGrant {
			b.PlaceGrant()
		}
		b.Stack.Bao.PutSecret(o.Env, "db", map[string]string{"password": o.Secret})
	}
	return b
}

// Configure applies edit (nil: none) to the box's config, validates it and writes it
// to CfgPath.
func (b *Box) Configure(edit func(*deployd.Config)) {
	b.T.Helper()
	if edit != nil {
		edit(&b.Cfg)
	}
	b.writeConfig(b.CfgPath, b.Cfg)
}

// WriteConfig writes the box's config, changed by edit, to the file name in the box's
// directory and returns its path; the box's own config stays as it is. Configs of a
// box share its directories, so they share its token and releases.
func (b *Box) WriteConfig(name string, edit func(*deployd.Config)) string {
	b.T.Helper()
	c := b.Cfg
	c.Compose.AllowPrivileged = append([]string(nil), c.Compose.AllowPrivileged...)
	if edit != nil {
		edit(&c)
	}
	p := filepath.Join(b.Dir, name)
	b.writeConfig(p, c)
	return p
}

// writeConfig validates c, writes it as YAML to p and checks that it reads back as c.
func (b *Box) writeConfig(p string, c deployd.Config) {
	b.T.Helper()
	if err := c.Validate(); err != nil {
		b.T.Fatalf("testbox: the box's config: %v", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	check(b.T, enc.Encode(c))
	data := buf.Bytes()
	check(b.T, os.WriteFile(p, data, 0o600))
	if back, err := deployd.LoadConfig(p); err != nil || !reflect.DeepEqual(back, c) {
		b.T.Fatalf("testbox: the written config does not read back as built: %v\n%s", err, data)
	}
}

// HoldLock takes the agent's run lock, as a run in flight would, and holds it until
// the test ends.
func (b *Box) HoldLock() {
	b.T.Helper()
	check(b.T, os.MkdirAll(b.Cfg.StateDir, 0o700))
	l := must(fsutil.TryLock(b.Cfg.LockPath()))(b.T)
	b.T.Cleanup(func() { _ = l.Unlock() })
}

// PlaceGrant mints a bootstrap grant of the box's environment (it supersedes the
// earlier ones), writes it to the grant file and returns it.
func (b *Box) PlaceGrant() string {
	b.T.Helper()
	g := b.Stack.Bao.MintGrant(b.Env)
	b.Grants = append(b.Grants, g)
	check(b.T, os.WriteFile(b.Cfg.BootstrapGrant, []byte(g+"\n"), 0o600))
	return g
}

// Tarball builds the bundle of spec, gzip-compressed when gz.
func Tarball(tb testing.TB, spec faketenancy.BundleSpec, gz bool) []byte {
	tb.Helper()
	spec.Gzip = gz
	return deploydtest.MakeBundle(tb, spec).Data
}

// Publish publishes the bundle of spec (gzip-compressed) for the box's environment,
// makes it desired and returns its sha.
func (b *Box) Publish(spec faketenancy.BundleSpec) string {
	b.T.Helper()
	sha, _, err := b.Stack.Tenancy.PublishBundle(b.Env, Tarball(b.T, spec, true))
	check(b.T, err)
	return sha
}

// SetDesired sets what the box's check-ins answer.
func (b *Box) SetDesired(d faketenancy.Desired) { b.Stack.Tenancy.SetDesired(b.Env, d) }

// LastReport is the newest report the fake tenancy received; it fails the test when
// none did.
func (b *Box) LastReport() faketenancy.Report {
	b.T.Helper()
	reps := b.Stack.Tenancy.Reports(b.Env)
	if len(reps) == 0 {
		b.T.Fatalf("no report arrived")
	}
	return reps[len(reps)-1]
}

// Leases counts the leases tenancy granted to the box.
func (b *Box) Leases() int { return len(b.Stack.Tenancy.Leases(b.Env)) }

// TenancyCalls counts the requests to the fake tenancy whose path starts with prefix.
func (b *Box) TenancyCalls(prefix string) int {
	return count(b.Stack.Tenancy.Requests(), func(r faketenancy.Request) bool { return strings.HasPrefix(r.Path, prefix) })
}

// BaoCalls counts the requests to the fake OpenBao whose path contains part.
func (b *Box) BaoCalls(part string) int {
	return count(b.Stack.Bao.Requests(), func(r fakebao.Request) bool { return strings.Contains(r.Path, part) })
}

// count counts the elements of s that match.
func count[T any](s []T, match func(T) bool) int {
	n := 0
	for _, v := range s {
		if match(v) {
			n++
		}
	}
	return n
}

// DockerCalls returns the fake docker's calls whose argv holds word, and the fake
// engine's requests that read what the docker command word reads
// (fakedocker.Call.EngineCommand: "version", "ps", "inspect"); with word "", every
// call, oldest first. It fails the test when the record cannot be read.
func (b *Box) DockerCalls(word string) []fakedocker.Call {
	b.T.Helper()
	calls := must(b.Docker.Calls())(b.T)
	if word == "" {
		return calls
	}
	return slices.DeleteFunc(calls, func(c fakedocker.Call) bool {
		if c.Argv[0] == fakedocker.EngineArgv0 {
			return c.EngineCommand() != word
		}
		return !slices.Contains(c.Argv, word)
	})
}

// DockerStatus is what the fake docker remembers (is the project up, how often was
// each command called, the images it holds); it fails the test when its state cannot
// be read.
func (b *Box) DockerStatus() fakedocker.Status {
	b.T.Helper()
	return must(b.Docker.Status())(b.T)
}

// Live is the sha `current` points to, "" when there is none.
func (b *Box) Live() string {
	target, err := os.Readlink(b.Cfg.CurrentLink())
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// Releases lists the release directories under deploy_dir.
func (b *Box) Releases() []string {
	b.T.Helper()
	var names []string
	for _, e := range must(os.ReadDir(filepath.Join(b.Cfg.DeployDir, "releases")))(b.T) {
		names = append(names, e.Name())
	}
	return names
}

// State reads the agent's state.json.
func (b *Box) State() deployd.State {
	b.T.Helper()
	return must(deployd.ReadState(b.Cfg))(b.T)
}

// check fails tb on err.
func check(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("testbox: %v", err)
	}
}

// must returns v, after failing the test given to what it returns on err:
// must(f())(tb).
func must[T any](v T, err error) func(testing.TB) T {
	return func(tb testing.TB) T {
		tb.Helper()
		check(tb, err)
		return v
	}
}

// NewAgent builds an in-process agent over the box's config, closed by tb.Cleanup.
// Unset fields of o: Logger writes JSON at debug level to Logs, DockerEnv is the fake
// docker's (its DOCKER_HOST names the fake engine), Hostname is "box-under-test".
func (b *Box) NewAgent(o deployd.Options) *deployd.Agent {
	b.T.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(b.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.DockerEnv == nil && b.Docker != nil {
		o.DockerEnv = b.Docker.Env()
	}
	if o.Hostname == "" {
		o.Hostname = "box-under-test"
	}
	a, err := deployd.New(context.Background(), b.Cfg, o)
	if err != nil {
		b.T.Fatalf("deployd.New: %v", err)
	}
	b.T.Cleanup(func() { _ = a.Close() })
	return a
}

// Tick runs one in-process tick of a (at most 30s), logs its outcome and returns it
// with its exit code.
func (b *Box) Tick(a *deployd.Agent) (deployd.Outcome, int) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := a.Tick(ctx)
	code := deployd.ExitCode(err)
	b.T.Logf("tick: action=%s result=%s code=%s leased=%t exit=%d err=%v", out.Action, out.Result, out.Code, out.Leased, code, err)
	return out, code
}

// ProcEnv is the process environment of the agent binary, then extra ("K=V"). With
// the fake docker: PATH (the fake's directory first), DOCKER_HOST (the fake engine's
// socket, which the agent passes on to docker through deployd.DockerEnv) and the
// fake's FAKE_DOCKER_* variables (the fake finds its files without them; they are
// there for the agent to keep from docker); with the real one: the system's PATH and
// HOME (the box's directory).
func (b *Box) ProcEnv(extra ...string) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + b.Dir}
	if b.Docker != nil {
		env = []string{"PATH=" + b.Docker.Dir + ":/usr/bin:/bin",
			"DOCKER_HOST=" + b.Docker.DockerHost(),
			"FAKE_DOCKER_LOG=" + b.Docker.Log,
			"FAKE_DOCKER_STATE=" + b.Docker.State,
			"FAKE_DOCKER_SCRIPT=" + b.Docker.Script}
	}
	return append(env, extra...)
}

// Start starts the agent binary with args in the box's directory, with ProcEnv(extraEnv…).
// Under go test -short it skips the test (SkipIfShort), Options.Binary given or not.
func (b *Box) Start(args []string, extraEnv ...string) *testprog.Proc {
	b.T.Helper()
	testprog.SkipIfShort(b.T)
	if b.bin == "" {
		b.bin = testprog.Build(b.T, testprog.AgentPkg, b.flags...)
	}
	return testprog.Start(b.T, b.bin, b.Dir, b.ProcEnv(extraEnv...), args...)
}

// Run runs the agent binary with args to its end (at most d) and returns the result.
func (b *Box) Run(d time.Duration, args []string, extraEnv ...string) testprog.Result {
	b.T.Helper()
	res := b.Start(args, extraEnv...).Wait(b.T, d)
	b.T.Logf("monky-deployd %s → exit %d in %s", strings.Join(args, " "), res.Code, res.Elapsed.Round(time.Millisecond))
	return res
}
