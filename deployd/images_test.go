package deployd_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// imageApp is a release whose app image changes with the serial, next to a sidecar
// image every release shares.
func imageApp(env string, serial int64) faketenancy.BundleSpec {
	return faketenancy.BundleSpec{EnvID: env, Serial: serial, Files: map[string]string{
		"compose.yaml": fmt.Sprintf("services:\n  app:\n    image: example.invalid/app:%d\n  cache:\n    image: example.invalid/cache:7\n", serial),
	}}
}

// images are the references of the fake engine's images, sorted.
func (b *box) images() []string {
	refs := b.DockerStatus().Images
	slices.Sort(refs)
	return refs
}

// TestImageHygiene: after an apply, the images only pruned releases used are removed
// by ID; the live and kept releases' images, and the one every release shares, stay;
// the report and the state say what was reclaimed.
func TestImageHygiene(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{config: func(c *deployd.Config) { c.Compose.KeepReleases = 2 }})
	for serial := int64(1); serial <= 2; serial++ {
		b.apply(imageApp(b.Env, serial))
	}
	assert.Nil(t, b.State().LastReclaim, "nothing pruned yet")
	assert.Empty(t, b.LastReport().Detail)
	require.Equal(t, []string{"example.invalid/app:1", "example.invalid/app:2", "example.invalid/cache:7"}, b.images())

	b.apply(imageApp(b.Env, 3))
	assert.Equal(t, []string{"example.invalid/app:2", "example.invalid/app:3", "example.invalid/cache:7"}, b.images(),
		"app:1 only release 1 used; release 2 is kept, cache:7 is shared")
	st := b.State()
	require.NotNil(t, st.LastReclaim)
	assert.Equal(t, 1, st.LastReclaim.Images)
	assert.Positive(t, st.LastReclaim.Bytes)
	assert.Len(t, st.Images, 2, "the records of pruned releases are dropped")
	rep := b.LastReport()
	assert.Equal(t, "applied", rep.Result)
	assert.Contains(t, rep.Detail, "removed 1 images only pruned releases used (up to 10.0 MiB)")

	var removals []string
	for _, c := range b.DockerCalls("") {
		if c.Argv[0] == "engine" && c.Argv[1] == "DELETE" {
			removals = append(removals, c.Argv[2])
		}
	}
	require.Len(t, removals, 1)
	assert.Regexp(t, `^/images/sha256:[0-9a-f]{64}$`, removals[0], "removed by ID, never by name")
	for _, c := range b.DockerCalls("") {
		assert.NotContains(t, strings.Join(c.Argv, " "), "prune", "never docker image prune")
	}
}

// TestDiskLowSaysWhatImagesWouldFree: a DISK_LOW refusal names how much removing the
// images of the releases older than the live and the previous one would free.
func TestDiskLowSaysWhatImagesWouldFree(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{config: func(c *deployd.Config) { c.Compose.KeepReleases = 3 }})
	for serial := int64(1); serial <= 3; serial++ {
		b.apply(imageApp(b.Env, serial))
	}
	b.Configure(func(c *deployd.Config) { c.MinFreeMB = 1 << 40 })
	b.newAgent()
	b.Publish(imageApp(b.Env, 4))
	b.tickEnds(deployd.ExitFailed, "DISK_LOW")
	rep := b.LastReport()
	assert.Contains(t, rep.Detail, "images only releases older than the live and the previous one use could free up to 10.0 MiB (1 images")
	assert.Len(t, b.images(), 4, "nothing removed by a refusal: app:1, 2, 3 and cache:7")
	assert.Equal(t, 3, b.Leases(), "a refusal takes no lease")
}

// TestImageHygieneRemovesTheImagesOfAFailedRelease: the images are recorded right
// after compose up, so a release that failed its health check loses its images too
// once it is pruned.
func TestImageHygieneRemovesTheImagesOfAFailedRelease(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{config: func(c *deployd.Config) { c.Compose.KeepReleases = 2 }})
	b.apply(imageApp(b.Env, 1))
	bad := b.Publish(imageApp(b.Env, 2))
	b.scriptRelease(bad, "app", fakedocker.State{State: "exited", ExitCode: 1})
	b.tickEnds(deployd.ExitFailed, "UNHEALTHY")
	require.Contains(t, b.images(), "example.invalid/app:2")
	for serial := int64(3); serial <= 4; serial++ {
		b.apply(imageApp(b.Env, serial))
	}
	assert.NotContains(t, b.Releases(), bad)
	assert.Equal(t, []string{"example.invalid/app:3", "example.invalid/app:4", "example.invalid/cache:7"}, b.images())
}

// TestImageHygieneWaitsForUnrecordedReleases: while a kept release has no record of
// its images (staged by an older agent), nothing is removed — an image it shares with
// a pruned release would look unused; once it is pruned, hygiene runs again.
func TestImageHygieneWaitsForUnrecordedReleases(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{config: func(c *deployd.Config) { c.Compose.KeepReleases = 2 }})
	var shas []string
	for serial := int64(1); serial <= 2; serial++ {
		shas = append(shas, b.apply(imageApp(b.Env, serial)))
	}
	// Release 2 was staged by an agent that kept no records.
	b.editState(func(raw map[string]any) {
		delete(raw["images"].(map[string]any), shas[1])
	})

	b.apply(imageApp(b.Env, 3))
	assert.Contains(t, b.images(), "example.invalid/app:1", "release 2 has no record: nothing is removed")
	assert.Contains(t, b.Logs.String(), "image hygiene waits")

	b.apply(imageApp(b.Env, 4))
	assert.NotContains(t, b.images(), "example.invalid/app:1", "release 2 is pruned: hygiene runs again")
	assert.Contains(t, b.images(), "example.invalid/app:2", "never recorded, so never removed")
}

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
	pull := exec.CommandContext(t.Context(), b.Docker.Path, "pull", ref)
	pull.Env = b.Docker.Env()
	out, err := pull.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestImagesArePulledBeforeTheLease: an apply pulls the images the box does not hold,
// before the lease; the next apply of a release with the same images pulls nothing.
func TestImagesArePulledBeforeTheLease(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, []string{"busybox:1.36", "nginx:1.27"}, sortedCopy(pulled(b)), "each image once, before compose up")
	calls := b.DockerCalls("")
	lastPull := slices.IndexFunc(calls, func(c fakedocker.Call) bool {
		return len(c.Argv) > 0 && c.Argv[0] == "pull" && c.Argv[len(c.Argv)-1] == "nginx:1.27"
	})
	firstUp := slices.IndexFunc(calls, func(c fakedocker.Call) bool { return slices.Contains(c.Argv, "up") })
	assert.Less(t, lastPull, firstUp, "the pulls come before compose up")
	assert.Contains(t, b.Logs.String(), "pulled the release's images; asking for a lease")

	b.Publish(faketenancy.SampleApp(b.Env, 2)) // a new config file, the same images
	b.tickExits(deployd.ExitOK)
	assert.Len(t, pulled(b), 2, "images the box holds are not pulled again")
}

func sortedCopy(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }

// TestMissingImageCostsNoLease: an image its registry does not have is IMAGE_MISSING
// before the lease: reported failed naming the service and the image, the previous
// release untouched, not remembered; once the image is pushed the next tick applies
// with one lease and no retry from tenancy.
func TestMissingImageCostsNoLease(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{script: &fakedocker.Script{MissingImages: []string{"nginx:9.99"}}})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.tickExits(deployd.ExitOK)
	leases := b.Leases()

	b.Publish(withImage(b.Env, 2, "nginx:9.99"))
	out := b.tickEnds(deployd.ExitFailed, "IMAGE_MISSING")
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

	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{})) // the image is pushed
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, leases+1, b.Leases())
	assert.NotEqual(t, first, b.Live())
}

// TestPullPolicies: build services and images from secrets are left to compose up;
// never requires the image on the box; always pulls an image the box holds.
func TestPullPolicies(t *testing.T) {
	t.Parallel()
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
	out := b.tickExits(deployd.ExitFailed)
	assert.Equal(t, "IMAGE_MISSING", string(out.Code), "%+v", out)
	assert.Contains(t, out.Detail, "pull_policy is never")
	assert.Contains(t, out.Detail, "acme/local:1")
	assert.Zero(t, b.Leases())
	assert.Empty(t, pulled(b), "a never image that is missing stops the pulls before any")

	// The box holds acme/local:1 now (loaded by hand): web is pulled although
	// always-pulled images are pulled even when held; built and private are not.
	hold(t, b, "acme/local:1")
	before := len(pulled(b))
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, []string{"acme/web:1"}, pulled(b)[before:])
}

// TestDataRootTooFullCostsNoLease: docker's data root (GET /info) with less free
// space than min_free_mb stops the pulls before any, as DISK_LOW with no lease,
// naming the data root; nothing is remembered, and once it has room the next tick
// applies. It mounts a 4 MiB tmpfs as the data root, so it needs root (CI is).
func TestDataRootTooFullCostsNoLease(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; CI runs this test as root")
	}
	root := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", root, "tmpfs", 0, "size=4194304,mode=0700"))
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
	b := newBox(t, boxOptions{
		script: &fakedocker.Script{DockerRootDir: root},
		config: func(c *deployd.Config) { c.MinFreeMB = 16 },
	})
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	out := b.tickExits(deployd.ExitFailed)
	assert.Equal(t, "DISK_LOW", string(out.Code), "%+v", out)
	assert.Contains(t, out.Detail, "docker's data root "+root+" has 4 MiB free, below min_free_mb 16")
	assert.Zero(t, b.Leases())
	assert.Empty(t, pulled(b), "nothing pulled into a data root without room")
	assert.Empty(t, b.State().Failed)
	assert.Contains(t, b.Logs.String(), "docker image prune")

	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{})) // room again: the data root is the state file's dir
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, 1, b.Leases())
}
