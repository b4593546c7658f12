package bundle

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// TestReadStaged: a release that Extract staged is read back as Verify saw it: the
// same manifest and the same services.
func TestReadStaged(t *testing.T) {
	data := goodTar(t)
	res, err := Verify(context.Background(), bytes.NewReader(data), expect())
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, Extract(context.Background(), bytes.NewReader(data), dir, res.SHA, Limits{}))

	got, err := ReadStaged(context.Background(), dir, Expect{})
	require.NoError(t, err)
	assert.Equal(t, res.Manifest, got.Manifest)
	assert.Equal(t, res.Services, got.Services)
	assert.NotEmpty(t, got.Services)
}

func TestReadStagedSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadStaged(context.Background(), dir, Expect{})
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist, "no manifest")

	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"schema":1}`), 0o644))
	_, err = ReadStaged(context.Background(), dir, Expect{})
	var refused *RefusedError
	require.ErrorAs(t, err, &refused, "a bad manifest is refused as Verify would")
	assert.Equal(t, codes.BundleMalformed, refused.Code())

	m := goodManifest()
	b := manifestEnt(t, m).body
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName), []byte(b), 0o644))
	_, err = ReadStaged(context.Background(), dir, Expect{})
	require.Error(t, err, "the compose file is missing")
	assert.Contains(t, err.Error(), "compose file compose.yaml")
	assert.False(t, errors.As(err, &refused))
}

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(manifestEnt(t, goodManifest()).body))
	require.NoError(t, err)
	assert.Equal(t, goodManifest(), m)
	_, err = ParseManifest([]byte(`{"schema":1,"unknown":true}`))
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
}
