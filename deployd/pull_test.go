package deployd_test

import (
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
)

// pulled lists the images the fake docker was asked to pull, in order.
func pulled(b *box) []string {
	var refs []string
	for _, c := range b.DockerCalls("pull") {
		if len(c.Argv) > 0 && c.Argv[0] == "pull" {
			refs = append(refs, c.Argv[len(c.Argv)-1])
		}
	}
	return refs
}

// withImage is the sample app with web's image replaced.
func withImage(env string, serial int64, image string) faketenancy.BundleSpec {
	spec := faketenancy.SampleApp(env, serial)
	files := map[string]string{}
	for k, v := range spec.Files {
		files[k] = v
	}
	files["compose.yaml"] = strings.Replace(files["compose.yaml"], "image: nginx:1.27", "image: "+image, 1)
	spec.Files = files
	return spec
}

// hold makes the fake engine hold ref, as a docker load or an earlier pull would.
func hold(t *testing.T, b *box, ref string) {
	t.Helper()
	var stderr strings.Builder
	code := fakedocker.MainConfig(fakedocker.Config{Log: b.Docker.Log, State: b.Docker.State}, []string{"pull", ref}, nil, nil, io.Discard, &stderr)
	require.Zero(t, code, stderr.String())
}

// TestImagesArePulledBeforeTheLease: an apply pulls the images the box does not hold,
// before the lease; the next apply of a release with the same images pulls nothing.
func TestImagesArePulledBeforeTheLease(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v\n%s", out, b.Logs)
	assert.Equal(t, []string{"busybox:1.36", "nginx:1.27"}, sortedCopy(pulled(b)), "each image once, before compose up")
	calls := b.Docker.Calls()
	lastPull := slices.IndexFunc(calls, func(c fakedockertest.Call) bool {
		return len(c.Argv) > 0 && c.Argv[0] == "pull" && c.Argv[len(c.Argv)-1] == "nginx:1.27"
	})
	firstUp := slices.IndexFunc(calls, func(c fakedockertest.Call) bool { return slices.Contains(c.Argv, "up") })
	assert.Less(t, lastPull, firstUp, "the pulls come before compose up")
	assert.Contains(t, b.Logs.String(), "pulled the release's images; asking for a lease")

	b.Publish(faketenancy.SampleApp(b.Env, 2)) // a new config file, the same images
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v", out)
	assert.Len(t, pulled(b), 2, "images the box holds are not pulled again")
}

func sortedCopy(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }

// TestMissingImageCostsNoLease: an image its registry does not have is IMAGE_MISSING
// before the lease: reported failed naming the service and the image, the previous
// release untouched, not remembered; once the image is pushed the next tick applies
// with one lease and no retry from tenancy.
func TestMissingImageCostsNoLease(t *testing.T) {
	b := newBox(t, boxOptions{script: &fakedockertest.Script{MissingImages: []string{"nginx:9.99"}}})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	leases := b.Leases()

	b.Publish(withImage(b.Env, 2, "nginx:9.99"))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "IMAGE_MISSING", string(out.Code))
	assert.False(t, out.Leased)
	assert.Equal(t, leases, b.Leases(), "no lease for a release whose image is missing")
	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, "IMAGE_MISSING", rep.Code)
	assert.Contains(t, rep.Detail, "web")
	assert.Contains(t, rep.Detail, "nginx:9.99")
	assert.Contains(t, rep.Detail, "manifest unknown")
	assert.Equal(t, first, b.Live(), "the live release is untouched")
	assert.Empty(t, b.State().Failed, "not remembered: pushing the image keeps the sha")
	assert.Contains(t, b.Logs.String(), "Push the image")

	b.Docker.SetScript(&fakedockertest.Script{}) // the image is pushed
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v", out)
	assert.Equal(t, leases+1, b.Leases())
	assert.NotEqual(t, first, b.Live())
}

// TestRegistryDownIsTemporary: a registry that cannot be reached exits 75 before the
// lease, reports nothing and remembers nothing.
func TestRegistryDownIsTemporary(t *testing.T) {
	b := newBox(t, boxOptions{script: &fakedockertest.Script{Commands: map[string]fakedocker.Command{
		"pull": {Stderr: "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host\n", Exit: 1, FailTimes: 1},
	}}})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitTemporary, code, "%+v", out)
	assert.Equal(t, "REGISTRY_UNAVAILABLE", string(out.Code))
	assert.Zero(t, b.Leases())
	assert.Zero(t, b.TenancyCalls("/v1/agent/report"), "a temporary failure reports nothing")
	assert.Empty(t, b.State().Failed)

	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v", out)
	assert.Equal(t, 1, b.Leases())
}

// TestPullPolicies: build services and images from secrets are left to compose up;
// never requires the image on the box; always pulls an image the box holds.
func TestPullPolicies(t *testing.T) {
	compose := `services:
  web:
    image: acme/web:1
    pull_policy: always
  local:
    image: acme/local:1
    pull_policy: never
  built:
    build: ./built
  private:
    image: ${PRIVATE_IMAGE}
`
	spec := faketenancy.BundleSpec{
		Files:   map[string]string{"compose.yaml": compose, "built/Dockerfile": "FROM scratch\n"},
		Secrets: map[string]faketenancy.SecretRef{"PRIVATE_IMAGE": {Path: "db", Key: "password"}},
	}
	b := newBox(t, boxOptions{})
	spec.EnvID = b.Env
	b.Publish(spec)
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "IMAGE_MISSING", string(out.Code), "%+v", out)
	assert.Contains(t, out.Detail, "pull_policy is never")
	assert.Contains(t, out.Detail, "acme/local:1")
	assert.Zero(t, b.Leases())
	assert.Empty(t, pulled(b), "a never image that is missing stops the pulls before any")

	// The box holds acme/local:1 now (loaded by hand): web is pulled although
	// always-pulled images are pulled even when held; built and private are not.
	hold(t, b, "acme/local:1")
	before := len(pulled(b))
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v\n%s", out, b.Logs)
	assert.Equal(t, []string{"acme/web:1"}, pulled(b)[before:])
}

// TestDataRootTooFullCostsNoLease: docker's data root (GET /info) with less free
// space than min_free_mb stops the pulls before any, as DISK_LOW with no lease,
// naming the data root; nothing is remembered, and once it has room the next tick
// applies. It mounts a 4 MiB tmpfs as the data root, so it needs root (CI is).
func TestDataRootTooFullCostsNoLease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; CI runs this test as root")
	}
	root := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", root, "tmpfs", 0, "size=4194304,mode=0700"))
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
	b := newBox(t, boxOptions{
		script: &fakedockertest.Script{DockerRootDir: root},
		config: func(c *deployd.Config) { c.MinFreeMB = 16 },
	})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "DISK_LOW", string(out.Code), "%+v", out)
	assert.Contains(t, out.Detail, "docker's data root "+root+" has 4 MiB free, below min_free_mb 16")
	assert.Zero(t, b.Leases())
	assert.Empty(t, pulled(b), "nothing pulled into a data root without room")
	assert.Empty(t, b.State().Failed)
	assert.Contains(t, b.Logs.String(), "docker image prune")

	b.Docker.SetScript(&fakedockertest.Script{}) // room again: the data root is the state file's dir
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, "%+v", out)
	assert.Equal(t, 1, b.Leases())
}
