package engine

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// registryHint is how to get the registry the pull scenarios run on the engine.
const registryHint = "apt-get install -y docker-registry (Debian's distribution registry; .ci/run installs it)"

// startRegistry runs Debian's docker-registry on a free loopback port for the test
// and returns its host:port. dockerd treats 127.0.0.0/8 registries as insecure by
// default, so plain HTTP works without configuring the daemon.
func startRegistry(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Fatalf("MONKY_ENGINE=1 but docker-registry is not installed: %s", registryHint)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	dir := t.TempDir()
	cfg := "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: " + filepath.Join(dir, "data") + "\nhttp:\n  addr: " + addr + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644))
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = log.Close() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "docker-registry did not answer on %s", addr)
	return addr
}

// pushed pushes the test image to the registry as repo:tag and removes the local
// tag, so that the box does not hold it (its layers stay: the test image's).
func (b *box) pushed(registry, repoTag string) string {
	b.T.Helper()
	ref := registry + "/" + repoTag
	b.dockerCLI("tag", built.image, ref)
	b.dockerCLI("push", ref)
	b.dockerCLI("rmi", ref)
	b.T.Cleanup(func() { _ = exec.Command("docker", "rmi", ref).Run() })
	return ref
}

// registryImage is an image of the release that the registry has (pushed) or not:
// on the engine in the test's registry, on the fake a name the fake pulls (or is
// scripted to miss).
func (b *box) registryImage(t *testing.T, present bool) string {
	if !b.be.engine {
		if present {
			return "registry.monky.test/monky-e2e/app:1"
		}
		b.script(fakedocker.Script{MissingImages: []string{"registry.monky.test/monky-e2e/app:never-pushed"}})
		return "registry.monky.test/monky-e2e/app:never-pushed"
	}
	reg := startRegistry(t)
	if present {
		return b.pushed(reg, "monky-e2e/"+b.project+":1")
	}
	return reg + "/monky-e2e/" + b.project + ":never-pushed"
}

// missingImage: a release whose image its registry does not have is refused before
// the lease (IMAGE_MISSING, naming the service and the image), and the previous
// release keeps running, untouched.
func missingImage(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	good := b.publish(release{compose: "services:\n" + webService, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	require.Equal(t, 0, b.tick())
	before := b.runID()
	missing := b.registryImage(t, false)
	b.publish(release{compose: "services:\n" + strings.Replace(webService, "{{image}}", missing, 1),
		vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	assert.Equal(t, 1, b.tick())
	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, "IMAGE_MISSING", rep.Code)
	assert.Contains(t, rep.Detail, "pull web")
	assert.Contains(t, rep.Detail, missing+": manifest for "+missing+" not found: manifest unknown", "what the daemon said")
	assert.Equal(t, 1, b.Leases(), "no lease for a release whose image is missing")
	assert.Equal(t, good, b.Live())
	assert.Equal(t, before, b.runID(), "the previous release's containers kept running untouched")
	if be.engine {
		assert.Equal(t, map[string]string{"web": "running"}, b.containers())
	}
}

// registryDown: a registry that cannot be reached exits 75 before the lease and
// reports nothing; the previous release keeps running.
func registryDown(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	good := b.publish(release{compose: "services:\n" + webService, vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	require.Equal(t, 0, b.tick())
	before := b.runID()
	l, err := net.Listen("tcp", "127.0.0.1:0") // a port that nothing listens on once closed
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	ref := closed + "/monky-e2e/app:1"
	b.script(fakedocker.Script{Commands: map[string]fakedocker.Command{"pull": {
		Stderr: `Error response from daemon: Get "http://` + closed + `/v2/": dial tcp ` + closed + ": connect: connection refused\n", Exit: 1}}})
	b.publish(release{compose: "services:\n" + strings.Replace(webService, "{{image}}", ref, 1),
		vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	reports := len(b.Stack.Tenancy.Reports(b.Env))
	assert.Equal(t, 75, b.tick())
	out := b.outputs[len(b.outputs)-1]
	assert.Contains(t, out, "code=REGISTRY_UNAVAILABLE")
	assert.Contains(t, out, "connection refused")
	assert.Equal(t, 1, b.Leases(), "no lease while the registry is down")
	assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "a temporary failure reports nothing")
	assert.Equal(t, good, b.Live())
	assert.Equal(t, before, b.runID())
}

// prePulled: an image the box does not hold is pulled before the lease, so that
// compose up pulls nothing: its output has no pull in it.
func prePulled(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{})
	ref := b.registryImage(t, true)
	sha := b.publish(release{compose: "services:\n" + strings.Replace(webService, "{{image}}", ref, 1),
		vars: map[string]string{"LOG_LEVEL": "info"}, secret: true})
	require.Equal(t, 0, b.tick())
	assert.Equal(t, sha, b.Live())
	out := b.outputs[len(b.outputs)-1]
	assert.Contains(t, out, "pulling an image before asking for a lease")
	assert.Contains(t, out, "pulled the image")
	pullAt := strings.Index(out, "pulled the release's images; asking for a lease")
	leaseAt := strings.Index(out, "deploy lease granted")
	require.Positive(t, pullAt)
	assert.Less(t, pullAt, leaseAt, "the pull comes before the lease")
	upLines := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `msg="docker compose up"`) {
			upLines++
			assert.NotContains(t, line, "Pull", "compose up pulled nothing: %s", line)
		}
	}
	assert.Positive(t, upLines, "compose up's output is in the log")
	if be.engine {
		assert.NotEmpty(t, b.dockerCLI("image", "inspect", "--format", "{{.Id}}", ref))
	}
}
