package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
)

// enableHint is how a developer turns the real-engine half on.
const enableHint = "sudo bash test/engine/dockerd.sh start && sudo bash tools/compose/build.sh --install && MONKY_ENGINE=1 go test ./test/engine/"

// canary is the secret value every scenario plants: it may appear in the release's
// .env and in the container, and nowhere else.
const canary = "canary-7f3e-Zq9!secret value with spaces"

// backend is where compose runs: the fake docker program or the real engine.
type backend struct {
	name   string
	engine bool
}

var (
	fake   = backend{name: "fake"}
	engine = backend{name: "engine", engine: true}
)

// built are the programs and the image the tests share, made once per process.
var built struct {
	once   sync.Once
	err    error
	dir    string
	agent  string // monky-deployd, as shipped
	testap string // the static test app
	image  string // the image of the test app on the engine ("" without the engine)
}

// engineWanted reports whether the real-engine half runs: MONKY_ENGINE=1.
func engineWanted() bool { return os.Getenv("MONKY_ENGINE") == "1" }

func buildAll() error {
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "monky-engine-test-")
		if built.err != nil {
			return
		}
		built.agent = filepath.Join(built.dir, "monky-deployd")
		built.testap = filepath.Join(built.dir, "app")
		for _, b := range []struct{ out, pkg string }{
			{built.agent, "github.com/monky/monky-deployd/cmd/monky-deployd"},
			{built.testap, "github.com/monky/monky-deployd/test/engine/testapp"},
		} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s: %w: %s", b.pkg, err, out)
				return
			}
		}
		if engineWanted() {
			built.image, built.err = importImage(built.testap)
		}
	})
	return built.err
}

// importImage makes the test image from the static test app: a tar holding /app and
// /tmp, `docker import`ed with ENTRYPOINT ["/app"] and the label monky.test=engine.
// Its tag is the app's sha, so that an unchanged app reuses the image.
func importImage(app string) (string, error) {
	data, err := os.ReadFile(app)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	tag := "monky-engine-test:" + hex.EncodeToString(sum[:6])
	if exec.Command("docker", "image", "inspect", tag).Run() == nil {
		return tag, nil
	}
	root, err := os.MkdirTemp("", "monky-engine-image-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(root) }()
	if err := os.WriteFile(filepath.Join(root, "app"), data, 0o755); err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return "", err
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return "", err
	}
	tarCmd := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command("docker", "import", "-c", `ENTRYPOINT ["/app"]`, "-c", "LABEL monky.test=engine", "-", tag)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	imp.Stdin = pipe
	var out bytes.Buffer
	imp.Stdout, imp.Stderr = &out, &out
	if err := tarCmd.Start(); err != nil {
		return "", err
	}
	if err := imp.Run(); err != nil {
		return "", fmt.Errorf("docker import %s: %w: %s", tag, err, out.String())
	}
	if err := tarCmd.Wait(); err != nil {
		return "", err
	}
	return tag, nil
}

// TestMain removes what the tests built; the image stays only while its tag is in use.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.image != "" {
		_ = exec.Command("docker", "image", "rm", "-f", built.image).Run()
	}
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// needBackend skips or fails a test for a backend that cannot run here: the fake
// always runs; the engine runs with MONKY_ENGINE=1 and then must work (CI sets it and
// never skips).
func needBackend(t testing.TB, be backend) {
	t.Helper()
	if be.engine {
		if !engineWanted() {
			t.Skip("the real-engine half needs a docker engine and compose v2; enable it with: " + enableHint)
		}
		if out, err := exec.Command("docker", "compose", "version").CombinedOutput(); err != nil {
			t.Fatalf("MONKY_ENGINE=1 but `docker compose version` fails (%v: %s); run: %s", err, out, enableHint)
		}
		if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
			t.Fatalf("MONKY_ENGINE=1 but no engine answers (%v: %s); run: %s", err, out, enableHint)
		}
	}
	require.NoError(t, buildAll())
}

// boxOpts configure newBox.
type boxOpts struct {
	env           string // default env-dev-01
	healthTimeout string // default 20s
	keepReleases  int    // default 3
	leaseBudget   int    // leases per hour; default 5, as tenancy's
}

// box is one box: the fakes of tenancy and OpenBao (in this process), the agent as a
// process, and compose on the fake docker or on the real engine under a project name
// of its own.
type box struct {
	t       testing.TB
	be      backend
	env     string
	dir     string
	project string
	cfgPath string
	stack   *deploydtest.Stack
	docker  *fakedockertest.Docker // fake only
	outputs []string               // everything the agent printed
	serial  int64
}

func newBox(t testing.TB, be backend, o boxOpts) *box {
	t.Helper()
	needBackend(t, be)
	if o.env == "" {
		o.env = "env-dev-01"
	}
	if o.healthTimeout == "" {
		o.healthTimeout = "20s"
	}
	if o.keepReleases == 0 {
		o.keepReleases = 3
	}
	b := &box{t: t, be: be, env: o.env, dir: t.TempDir(), stack: deploydtest.NewStack(t, &fakestack.Options{LeaseBudget: o.leaseBudget})}
	b.project = "monky-e2e-" + randomHex(4)
	docker := "docker"
	if !be.engine {
		b.docker = fakedockertest.Install(t, &fakedockertest.Script{})
		docker = b.docker.Path
	} else {
		t.Cleanup(b.removeProject)
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
  project: %s
  docker: %s
  health_timeout: %s
  keep_releases: %d
`, b.env, filepath.Join(b.dir, "srv"), filepath.Join(b.dir, "state"), filepath.Join(b.dir, "grant.jwt"),
		b.stack.TenancyURL(), b.stack.BaoAddr(), b.project, docker, o.healthTimeout, o.keepReleases)
	require.NoError(t, os.WriteFile(b.cfgPath, []byte(cfg), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "grant.jwt"), []byte(b.stack.Grant(b.env)+"\n"), 0o600))
	b.stack.PutSecret(b.env, "db", map[string]string{"password": canary})
	t.Cleanup(b.checkCanary)
	return b
}

func randomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

// image is the image a service runs: the test image on the engine, a name on the fake.
func (b *box) image() string {
	if b.be.engine {
		return built.image
	}
	return "monky-engine-test:fake"
}

// release is one bundle: its compose file (with {{image}} for the test image), and
// whether it reads the canary secret as DB_PASSWORD.
type release struct {
	compose string
	vars    map[string]string
	secret  bool
}

// publish publishes r with the next serial and returns its sha.
func (b *box) publish(r release) string {
	b.t.Helper()
	b.serial++
	spec := faketenancy.BundleSpec{
		EnvID:  b.env,
		Serial: b.serial,
		Files:  map[string]string{"compose.yaml": strings.ReplaceAll(r.compose, "{{image}}", b.image())},
		Vars:   r.vars,
	}
	if r.secret {
		spec.Secrets = map[string]faketenancy.SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}}
	}
	bn := deploydtest.MakeBundle(b.t, spec)
	sha, _ := b.stack.PublishBundle(b.env, bn.Data)
	return sha
}

// script sets the fake docker's script; the engine needs none (it is the truth).
func (b *box) script(s fakedockertest.Script) {
	if b.docker != nil {
		b.docker.SetScript(&s)
	}
}

// procEnv is the agent's process environment.
func (b *box) procEnv() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + b.dir}
	if b.docker != nil {
		env = []string{"PATH=" + b.docker.Dir + ":/usr/bin:/bin",
			fakedocker.EnvLog + "=" + b.docker.Log,
			fakedocker.EnvState + "=" + b.docker.State,
			fakedocker.EnvScript + "=" + b.docker.Script}
	}
	return env
}

// proc is a started run of the agent.
type proc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
	code int
}

// start starts `monky-deployd args… --config <box>` in its own process group.
func (b *box) start(args ...string) *proc {
	b.t.Helper()
	cmd := exec.Command(built.agent, append(args, "--config", b.cfgPath)...)
	cmd.Env = b.procEnv()
	cmd.Dir = b.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(b.t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	b.t.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL to the process group (the agent and its docker children, as
// systemd's KillMode=control-group does) and waits for the agent.
func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// tick runs one `monky-deployd run` to its end and returns its exit code.
func (b *box) tick() int {
	b.t.Helper()
	start := time.Now()
	p := b.start("run")
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		p.kill()
		b.t.Fatalf("the tick did not end within 3 minutes; output:\n%s", p.out.String())
	}
	b.outputs = append(b.outputs, p.out.String())
	b.t.Logf("tick → exit %d in %s", p.code, time.Since(start).Round(time.Millisecond))
	if testing.Verbose() && p.code != 0 {
		b.t.Logf("agent output:\n%s", p.out.String())
	}
	return p.code
}

// status runs `monky-deployd status` and returns what it printed.
func (b *box) status() string {
	b.t.Helper()
	p := b.start("status")
	<-p.done
	b.outputs = append(b.outputs, p.out.String())
	return p.out.String()
}

// lastReport is the newest report the fake tenancy received.
func (b *box) lastReport() faketenancy.Report {
	b.t.Helper()
	reps := b.stack.Reports(b.env)
	require.NotEmpty(b.t, reps, "no report arrived")
	return reps[len(reps)-1]
}

// leases counts the leases tenancy granted.
func (b *box) leases() int { return len(b.stack.Leases(b.env)) }

// live is the sha `current` points to, "" when there is none.
func (b *box) live() string {
	target, err := os.Readlink(filepath.Join(b.dir, "srv", "current"))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// releases lists the release directories under deploy_dir.
func (b *box) releases() []string {
	b.t.Helper()
	entries, err := os.ReadDir(filepath.Join(b.dir, "srv", "releases"))
	require.NoError(b.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// serviceStates maps each service of the last report to "state/health".
func serviceStates(r faketenancy.Report) map[string]string {
	m := map[string]string{}
	for _, s := range r.Services {
		m[s.Name] = s.State + "/" + s.Health
	}
	return m
}

// docker runs the docker CLI against the engine and returns its trimmed output.
func (b *box) dockerCLI(args ...string) string {
	b.t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	require.NoError(b.t, err, "docker %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// containers lists the project's containers on the engine as "service state".
func (b *box) containers() map[string]string {
	b.t.Helper()
	out := b.dockerCLI("ps", "-a", "--filter", "label=com.docker.compose.project="+b.project,
		"--format", `{{.Label "com.docker.compose.service"}} {{.State}}`)
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if svc, state, ok := strings.Cut(line, " "); ok {
			m[svc] = state
		}
	}
	return m
}

// containerID is the ID of the service's container on the engine.
func (b *box) containerID(service string) string {
	return b.dockerCLI("ps", "-aq", "--no-trunc", "--filter", "label=com.docker.compose.project="+b.project,
		"--filter", "label=com.docker.compose.service="+service)
}

// volumes lists the project's volumes on the engine.
func (b *box) volumes() []string {
	out := b.dockerCLI("volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+b.project)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// envHash is the sha256 of an environment variable inside the service's container,
// so that a test checks a secret's arrival without printing it.
func (b *box) envHash(service, name string) string {
	return b.dockerCLI("exec", b.containerID(service), "/app", "envhash", name)
}

// removeProject removes every container, volume and network of the box's project
// from the engine: the tests touch nothing they did not create.
func (b *box) removeProject() {
	label := "label=com.docker.compose.project=" + b.project
	for _, kind := range [][]string{{"container", "rm", "-f", "-v"}, {"volume", "rm", "-f"}, {"network", "rm"}} {
		ls := exec.Command("docker", kind[0], "ls", "-aq", "--filter", label)
		if kind[0] != "container" {
			ls = exec.Command("docker", kind[0], "ls", "-q", "--filter", label)
		}
		out, err := ls.Output()
		ids := strings.Fields(string(out))
		if err != nil || len(ids) == 0 {
			continue
		}
		args := append(append([]string(nil), kind...), ids...)
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			b.t.Logf("cleanup: docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// checkCanary: the secret appears in no output of the agent, no report or check-in,
// no file of the state directory or the deploy directory but a release's .env (mode
// 0600), and, on the engine, in the container.
func (b *box) checkCanary() {
	t := b.t
	for i, out := range b.outputs {
		if strings.Contains(out, canary) {
			t.Errorf("the canary secret is in the output of agent run %d", i+1)
		}
	}
	for _, r := range b.stack.Reports(b.env) {
		if strings.Contains(fmt.Sprintf("%+v", r), canary) {
			t.Errorf("the canary secret is in a report")
		}
	}
	for _, c := range b.stack.Checkins(b.env) {
		if strings.Contains(fmt.Sprintf("%+v", c), canary) {
			t.Errorf("the canary secret is in a check-in")
		}
	}
	err := filepath.WalkDir(b.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(data, []byte(canary)) {
			return nil
		}
		rel, _ := filepath.Rel(b.dir, path)
		if d.Name() != ".env" || filepath.Base(filepath.Dir(filepath.Dir(path))) != "releases" {
			t.Errorf("the canary secret is in %s", rel)
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s holds the secret with mode %v, want 0600", rel, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("walking the box: %v", err)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", d, what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
