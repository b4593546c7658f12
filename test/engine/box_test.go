package engine

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
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
	agent  string // monky-deployd, as shipped
	testap string // the static test app
	image  string // the image of the test app on the engine ("" without the engine)
}

// engineWanted reports whether the real-engine half runs: MONKY_ENGINE=1.
func engineWanted() bool { return os.Getenv("MONKY_ENGINE") == "1" }

// buildAll builds the agent and the test app, and imports the test image when the
// engine half runs.
func buildAll(tb testing.TB) {
	tb.Helper()
	built.agent = testprog.Build(tb, testprog.AgentPkg, "-trimpath")
	built.testap = testprog.Build(tb, "github.com/monky/monky-deployd/test/engine/testapp", "-trimpath")
	built.once.Do(func() {
		if engineWanted() {
			built.image, built.err = importImage(built.testap, "", "")
		}
	})
	require.NoError(tb, built.err)
}

// importImage makes the test image from the static test app: a tar holding /app and
// /tmp, `docker import`ed with ENTRYPOINT ["/app"] and the label monky.test=engine.
// With tag "" its tag is the app's sha, so that an unchanged app reuses the image.
// Otherwise it is imported as tag with the label monky.test.variant=variant too: an
// image of its own, with an ID no other variant has.
func importImage(app, tag, variant string) (string, error) {
	data, err := os.ReadFile(app)
	if err != nil {
		return "", err
	}
	if tag == "" {
		sum := sha256.Sum256(data)
		tag = "monky-engine-test:" + hex.EncodeToString(sum[:6])
		if exec.Command("docker", "image", "inspect", tag).Run() == nil {
			return tag, nil
		}
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
	args := []string{"import", "-c", `ENTRYPOINT ["/app"]`, "-c", "LABEL monky.test=engine"}
	if variant != "" {
		args = append(args, "-c", "LABEL monky.test.variant="+variant)
	}
	imp := exec.Command("docker", append(args, "-", tag)...)
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
	code := testprog.Run(m)
	if built.image != "" {
		_ = exec.Command("docker", "image", "rm", "-f", built.image).Run()
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
	buildAll(t)
}

// boxOpts configure newBox.
type boxOpts struct {
	env           string // default env-dev-01
	healthTimeout string // default 20s
	keepReleases  int    // default 3
	leaseBudget   int    // leases per hour; default 5, as tenancy's
}

// box is one box: a testbox.Box (the fakes of tenancy and OpenBao in this process, a
// config in a temporary directory), the agent as a process, and compose on the fake
// docker or on the real engine under a project name of its own.
type box struct {
	*testbox.Box
	be      backend
	project string
	outputs []string // everything the agent printed
	serial  int64
}

func newBox(t testing.TB, be backend, o boxOpts) *box {
	t.Helper()
	needBackend(t, be)
	if o.healthTimeout == "" {
		o.healthTimeout = "20s"
	}
	health, err := time.ParseDuration(o.healthTimeout)
	require.NoError(t, err)
	if o.keepReleases == 0 {
		o.keepReleases = 3
	}
	b := &box{be: be, project: "monky-e2e-" + randomHex(4)}
	b.Box = testbox.New(t, testbox.Options{
		Env: o.env, Stack: &fakestack.Options{LeaseBudget: o.leaseBudget}, RealDocker: be.engine,
		Secret: canary, Binary: built.agent,
		Config: func(c *deployd.Config) {
			c.Compose.Project = b.project
			c.Compose.HealthTimeout = deployd.Duration(health)
			c.Compose.KeepReleases = o.keepReleases
		},
	})
	if be.engine {
		t.Cleanup(func() { removeProject(t, b.project) })
	}
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
	files   map[string]string // other files of the bundle
	// restore and hooks are the manifest's (schema 2 when set).
	restore string
	hooks   *faketenancy.HooksSpec
}

// publish publishes r with the next serial and returns its sha.
func (b *box) publish(r release) string {
	b.T.Helper()
	b.serial++
	spec := faketenancy.BundleSpec{
		EnvID:   b.Env,
		Serial:  b.serial,
		Files:   map[string]string{"compose.yaml": strings.ReplaceAll(r.compose, "{{image}}", b.image())},
		Vars:    r.vars,
		Restore: r.restore, Hooks: r.hooks,
	}
	for name, content := range r.files {
		spec.Files[name] = content
	}
	if r.secret {
		spec.Secrets = map[string]faketenancy.SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}}
	}
	bn := deploydtest.MakeBundle(b.T, spec)
	sha, _, err := b.Stack.Tenancy.PublishBundle(b.Env, bn.Data)
	require.NoError(b.T, err)
	return sha
}

// script sets the fake docker's script; the engine needs none (it is the truth).
func (b *box) script(s fakedocker.Script) {
	if b.Docker != nil {
		require.NoError(b.T, b.Docker.SetScript(&s))
	}
}

// start starts `monky-deployd args… --config <box>` in its own process group.
func (b *box) start(args ...string) *testprog.Proc {
	b.T.Helper()
	return b.Start(append(args, "--config", b.CfgPath))
}

// tick runs one `monky-deployd run` to its end and returns its exit code.
func (b *box) tick() int {
	b.T.Helper()
	res := b.start("run").Wait(b.T, 3*time.Minute)
	b.outputs = append(b.outputs, res.Output())
	b.T.Logf("tick → exit %d in %s", res.Code, res.Elapsed.Round(time.Millisecond))
	if testing.Verbose() && res.Code != 0 {
		b.T.Logf("agent output:\n%s", res.Output())
	}
	return res.Code
}

// status runs `monky-deployd status` and returns what it printed.
func (b *box) status() string {
	b.T.Helper()
	out := b.start("status").Wait(b.T, time.Minute).Output()
	b.outputs = append(b.outputs, out)
	return out
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
	b.T.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	require.NoError(b.T, err, "docker %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// containers lists the project's containers on the engine as "service state".
func (b *box) containers() map[string]string {
	b.T.Helper()
	return b.psByService("State")
}

// psByService maps the service of each of the project's containers on the engine to
// the field of `docker ps` (State, ID, …) that field names, untruncated.
func (b *box) psByService(field string) map[string]string {
	b.T.Helper()
	out := b.dockerCLI("ps", "-a", "--no-trunc", "--filter", "label=com.docker.compose.project="+b.project,
		"--format", `{{.Label "com.docker.compose.service"}} {{.`+field+`}}`)
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if svc, value, ok := strings.Cut(line, " "); ok {
			m[svc] = value
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

// removeProject removes every container, volume and network of a project from the
// engine: the tests touch nothing they did not create.
func removeProject(tb testing.TB, project string) {
	label := "label=com.docker.compose.project=" + project
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
			tb.Logf("cleanup: docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// checkCanary: the secret appears in no output of the agent, no report or check-in,
// no file of the state directory or the deploy directory but a release's .env (mode
// 0600), and, on the engine, in the container.
func (b *box) checkCanary() {
	t := b.T
	for i, out := range b.outputs {
		if strings.Contains(out, canary) {
			t.Errorf("the canary secret is in the output of agent run %d", i+1)
		}
	}
	for _, r := range b.Stack.Tenancy.Reports(b.Env) {
		if strings.Contains(fmt.Sprintf("%+v", r), canary) {
			t.Errorf("the canary secret is in a report")
		}
	}
	for _, c := range b.Stack.Tenancy.Checkins(b.Env) {
		if strings.Contains(fmt.Sprintf("%+v", c), canary) {
			t.Errorf("the canary secret is in a check-in")
		}
	}
	err := filepath.WalkDir(b.Dir, func(path string, d fs.DirEntry, err error) error {
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
		rel, _ := filepath.Rel(b.Dir, path)
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
