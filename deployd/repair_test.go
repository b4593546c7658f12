package deployd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestRepairKeepsAReleaseCaughtMidRestage: restaging a kept release moves the old copy
// to releases/.<sha>.old before the new one is renamed into place. A crash between the
// two renames must not cost the box that release (it may be the previous one, the
// restore target): the next tick's repair puts it back.
func TestRepairKeepsAReleaseCaughtMidRestage(t *testing.T) {
	b := newBox(t, boxOptions{})
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	b.Publish(faketenancy.SampleApp(b.Env, 2))
	_, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	require.Equal(t, first, b.State().PreviousSHA)

	// The crash: the kept release was moved aside, the new copy not yet in place.
	rel := b.Cfg.ReleasesDir()
	require.NoError(t, os.Rename(filepath.Join(rel, first), filepath.Join(rel, "."+first+".old")))
	require.NoError(t, os.MkdirAll(filepath.Join(rel, "."+first+".tmp"), 0o755))

	b.idleTick()
	_, err := os.Stat(filepath.Join(rel, first, "manifest.json"))
	assert.NoError(t, err, "the previous release is back in place")
	for _, leftover := range []string{"." + first + ".old", "." + first + ".tmp"} {
		_, err := os.Stat(filepath.Join(rel, leftover))
		assert.True(t, os.IsNotExist(err), "%s removed", leftover)
	}
}
