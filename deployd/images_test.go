package deployd_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
	"github.com/monky/monky-deployd/internal/fakes/fakedocker/fakedockertest"
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
	var refs []string
	for _, im := range b.Docker.Status().Images {
		refs = append(refs, im.Ref)
	}
	slices.Sort(refs)
	return refs
}

// TestImageHygiene: after an apply, the images only pruned releases used are removed
// by ID; the live and kept releases' images, and the one every release shares, stay;
// the report and the state say what was reclaimed.
func TestImageHygiene(t *testing.T) {
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
	for _, c := range b.Docker.Calls() {
		if c.Argv[0] == "engine" && c.Argv[1] == "DELETE" {
			removals = append(removals, c.Argv[2])
		}
	}
	require.Len(t, removals, 1)
	assert.Regexp(t, `^/images/sha256:[0-9a-f]{64}$`, removals[0], "removed by ID, never by name")
	for _, c := range b.Docker.Calls() {
		assert.NotContains(t, strings.Join(c.Argv, " "), "prune", "never docker image prune")
	}
}

// TestDiskLowSaysWhatImagesWouldFree: a DISK_LOW refusal names how much removing the
// images of the releases older than the live and the previous one would free.
func TestDiskLowSaysWhatImagesWouldFree(t *testing.T) {
	b := newBox(t, boxOptions{config: func(c *deployd.Config) { c.Compose.KeepReleases = 3 }})
	for serial := int64(1); serial <= 3; serial++ {
		b.apply(imageApp(b.Env, serial))
	}
	b.Configure(func(c *deployd.Config) { c.MinFreeMB = 1 << 40 })
	b.newAgent()
	b.Publish(imageApp(b.Env, 4))
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, "DISK_LOW", string(out.Code))
	rep := b.LastReport()
	assert.Contains(t, rep.Detail, "images only releases older than the live and the previous one use could free up to 10.0 MiB (1 images")
	assert.Len(t, b.images(), 4, "nothing removed by a refusal: app:1, 2, 3 and cache:7")
	assert.Equal(t, 3, b.Leases(), "a refusal takes no lease")
}

// TestImageHygieneRemovesTheImagesOfAFailedRelease: the images are recorded right
// after compose up, so a release that failed its health check loses its images too
// once it is pruned.
func TestImageHygieneRemovesTheImagesOfAFailedRelease(t *testing.T) {
	b := newBox(t, boxOptions{config: func(c *deployd.Config) { c.Compose.KeepReleases = 2 }})
	b.apply(imageApp(b.Env, 1))
	bad := b.Publish(imageApp(b.Env, 2))
	b.Docker.SetScript(&fakedockertest.Script{Releases: map[string]map[string]fakedocker.Service{
		bad: {"app": {States: []fakedocker.State{{State: "exited", ExitCode: 1}}}},
	}})
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	require.Equal(t, "UNHEALTHY", string(out.Code))
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
