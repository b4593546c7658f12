package engine

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// prunedImages: keep_releases 2 and three releases, each with an image of its own
// (web) and one image all three share (worker). The third apply prunes the first
// release and removes, by ID, the one image only it used; the images of the kept
// releases and the shared one stay. On the engine, an image of a pruned release that
// a container outside the project still runs stays too, and the apply succeeds.
func prunedImages(t *testing.T, be backend) {
	b := newBox(t, be, boxOpts{keepReleases: 2})
	img := b.appImages("1", "2", "3", "4", "shared")
	compose := func(own string) string {
		return "services:\n" + strings.Replace(webService, "{{image}}", img[own], 1) +
			strings.Replace(workerService, "{{image}}", img["shared"], 1)
	}
	var shas []string
	for i, own := range []string{"1", "2", "3"} {
		shas = append(shas, b.publish(release{compose: compose(own), vars: map[string]string{"LOG_LEVEL": "info"}, secret: true}))
		require.Equal(t, 0, b.tick())
		rep := b.LastReport()
		require.Equal(t, "applied", rep.Result, "release %d: %+v", i+1, rep)
		if i < 2 {
			assert.NotContains(t, rep.Detail, "removed", "release %d prunes nothing", i+1)
			assert.Nil(t, b.State().LastReclaim, "release %d prunes nothing", i+1)
		}
		assert.ElementsMatch(t, []string{b.imageID(img[own]), b.imageID(img["shared"])}, b.State().Images[shas[i]],
			"the images release %d runs, by ID", i+1)
	}
	assert.ElementsMatch(t, shas[1:], b.Releases(), "the first release was pruned")
	rep := b.LastReport()
	assert.Contains(t, rep.Detail, "removed 1 images only pruned releases used (up to ")
	st := b.State()
	require.NotNil(t, st.LastReclaim, "state.json has last_reclaim")
	assert.Equal(t, 1, st.LastReclaim.Images)
	assert.Zero(t, st.LastReclaim.Failed)
	assert.Positive(t, st.LastReclaim.Bytes)
	assert.ElementsMatch(t, shas[1:], keys(st.Images), "the pruned release's image record is dropped")
	assert.False(t, b.hasImage(img["1"]), "the image only the pruned release used is gone")
	for _, kept := range []string{"2", "3", "shared"} {
		assert.True(t, b.hasImage(img[kept]), "image %s stays", kept)
	}
	if !be.engine {
		// The fake holds one project and no container outside it (docs/FAKES.md): the
		// rest needs a container that is not the release's.
		return
	}

	// A container outside the project runs release 2's image: pruning release 2 must
	// not remove it, nor fail the apply.
	b.runOutside(img["2"])
	shas = append(shas, b.publish(release{compose: compose("4"), vars: map[string]string{"LOG_LEVEL": "info"}, secret: true}))
	require.Equal(t, 0, b.tick())
	rep = b.LastReport()
	require.Equal(t, "applied", rep.Result, "%+v", rep)
	assert.Equal(t, shas[3], b.Live())
	assert.ElementsMatch(t, shas[2:], b.Releases(), "release 2 was pruned")
	assert.True(t, b.hasImage(img["2"]), "the image a container outside the project uses stays")
	assert.NotContains(t, rep.Detail, "removed", "nothing was removed")
	for _, kept := range []string{"3", "4", "shared"} {
		assert.True(t, b.hasImage(img[kept]), "image %s stays", kept)
	}
	// The agent says why it kept the image, and keeps release 2's record, so that the
	// next apply tries again once the container is gone.
	out := b.outputs[len(b.outputs)-1]
	assert.Contains(t, out, "image hygiene kept images of pruned releases that a container outside the live release still uses")
	assert.Contains(t, out, b.imageID(img["2"]))
	assert.Contains(t, b.State().Images, shas[1], "release 2's images are remembered for the next apply")
}

// keys are the keys of m.
func keys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// appImages makes an image of the test app for each name, each with an ID of its own,
// and returns their references by name: monky-test/app-<random>:<name>, `docker
// import`ed on the engine and removed when the test ends (whatever the agent left);
// on the fake only names, whose IDs the fake derives from them.
func (b *box) appImages(names ...string) map[string]string {
	b.T.Helper()
	repo := "monky-test/app-" + randomHex(4)
	refs := map[string]string{}
	for _, n := range names {
		refs[n] = repo + ":" + n
	}
	if !b.be.engine {
		return refs
	}
	b.T.Cleanup(func() {
		// Cleanups run last first: the project's containers, which use the images,
		// would be removed after this one; remove them first.
		removeProject(b.T, b.project)
		for _, ref := range refs {
			if exec.Command("docker", "image", "inspect", ref).Run() != nil {
				continue // the agent removed it
			}
			if out, err := exec.Command("docker", "image", "rm", ref).CombinedOutput(); err != nil {
				b.T.Errorf("cleanup: docker image rm %s: %v: %s", ref, err, out)
			}
		}
	})
	for _, n := range names {
		_, err := importImage(built.testap, refs[n], n)
		require.NoError(b.T, err)
	}
	return refs
}

// imageID is the ID of the image ref: as the engine resolved it, or the fake's.
func (b *box) imageID(ref string) string {
	b.T.Helper()
	if b.be.engine {
		return b.dockerCLI("image", "inspect", "--format", "{{.Id}}", ref)
	}
	return fakedocker.ImageID(ref)
}

// hasImage reports whether the image ref is still there: in `docker images` on the
// engine, among the fake engine's images on the fake.
func (b *box) hasImage(ref string) bool {
	b.T.Helper()
	if b.be.engine {
		repo, tag, _ := strings.Cut(ref, ":")
		out := b.dockerCLI("images", "--format", "{{.Repository}}:{{.Tag}}", repo)
		return slices.Contains(strings.Split(out, "\n"), repo+":"+tag)
	}
	return slices.Contains(b.DockerStatus().Images, ref) // the refs here carry a tag, as the fake lists them
}

// runOutside starts, on the engine, a container of image ref that belongs to no
// compose project (`docker run -d`), removed when the test ends.
func (b *box) runOutside(ref string) {
	b.T.Helper()
	require.True(b.T, b.be.engine, "a container outside the project needs the engine")
	name := "monky-e2e-byhand-" + randomHex(4)
	b.T.Cleanup(func() {
		if out, err := exec.Command("docker", "rm", "-f", name).CombinedOutput(); err != nil {
			b.T.Errorf("cleanup: docker rm -f %s: %v: %s", name, err, out)
		}
	})
	b.dockerCLI("run", "-d", "--name", name, "--label", "monky.test=engine", "-e", "SERVICE=byhand", ref, "serve")
}
