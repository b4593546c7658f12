package release_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/release"
)

// TestCurrentAndTidy: current names a staged release or nothing; releases/ is tidy
// until a hidden leftover of an interrupted apply lies in it.
func TestCurrentAndTidy(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	d := release.Dirs{DeployDir: t.TempDir()}
	assert.Empty(t, d.Current(), "no current")
	assert.True(t, d.Tidy(), "no releases/ at all")

	require.NoError(t, os.MkdirAll(d.Dir(sha), 0o755))
	require.NoError(t, os.Symlink(filepath.Join("releases", sha), d.CurrentLink()))
	assert.Equal(t, sha, d.Current())
	assert.True(t, d.Has(sha))
	assert.False(t, d.Has("not-a-sha"))
	assert.True(t, d.Tidy())

	require.NoError(t, os.WriteFile(filepath.Join(d.Releases(), "."+sha+".bundle"), nil, 0o600))
	assert.False(t, d.Tidy(), "a leftover download")

	require.NoError(t, os.Remove(d.CurrentLink()))
	require.NoError(t, os.Symlink(filepath.Join("releases", strings.Repeat("cd", 32)), d.CurrentLink()))
	assert.Empty(t, d.Current(), "current names a release that is not staged")

	assert.Equal(t, "abababababab", release.Short(sha))
	assert.Equal(t, "abc", release.Short("abc"))
}
