package release

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bundle"
)

// makeBundle is a minimal bundle (manifest + compose.yaml) of the given serial, and
// its sha by the formula of docs/BUNDLE.md.
func makeBundle(t *testing.T, serial int) ([]byte, string) {
	t.Helper()
	files := map[string]string{
		"compose.yaml":  "services:\n  web:\n    image: example.invalid/web:1\n",
		"manifest.json": fmt.Sprintf(`{"schema":1,"env_id":"env-dev-01","serial":%d,"compose_files":["compose.yaml"],"files":["compose.yaml"],"vars":{},"secrets":{}}`, serial),
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := slices.Sorted(maps.Keys(files))
	var listing strings.Builder
	for _, n := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(files[n]))
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&listing, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	require.NoError(t, tw.Close())
	sum := sha256.Sum256([]byte(listing.String()))
	return buf.Bytes(), hex.EncodeToString(sum[:])
}

// staged stages a bundle of serial whose .env holds theSecret, dated at (prune keeps
// the newest), and returns its sha.
func staged(t *testing.T, s *Store, serial int, at time.Time) string {
	t.Helper()
	data, sha := makeBundle(t, serial)
	require.NoError(t, s.Stage(t.Context(), bytes.NewReader(data), sha, []byte("DB_PASSWORD="+theSecret+"\n"), nil))
	require.NoError(t, os.Chtimes(s.Dir(sha), at, at))
	return sha
}

func TestStageWritesTheReleaseAndItsEnv(t *testing.T) {
	s := New(t.TempDir(), nil)
	sha := staged(t, s, 1, time.Now())
	assert.True(t, s.Has(sha))
	fi, err := os.Stat(filepath.Join(s.Dir(sha), ".env"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	m, err := s.Manifest(sha)
	require.NoError(t, err)
	assert.EqualValues(t, 1, m.Serial)
	assert.EqualValues(t, 1, s.Serial(sha))
	rel, err := s.Read(t.Context(), sha, bundle.Expect{})
	require.NoError(t, err)
	assert.Equal(t, []string{"web"}, rel.Services)
	// A restage replaces the whole release (its .env may hold older secrets).
	data, _ := makeBundle(t, 1)
	require.NoError(t, s.Stage(t.Context(), bytes.NewReader(data), sha, []byte("A=2\n"), nil))
	env, err := os.ReadFile(filepath.Join(s.Dir(sha), ".env"))
	require.NoError(t, err)
	assert.Equal(t, "A=2\n", string(env))
	entries, err := os.ReadDir(filepath.Dir(s.Dir(sha)))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no leftover beside the release")
}

// The labels are computed from the extracted files before the rename, so a release
// is never live without them; ComposeFiles adds them after the manifest's files.
func TestStageWritesTheLabelsBeforeTheRename(t *testing.T) {
	s := New(t.TempDir(), nil)
	data, sha := makeBundle(t, 1)
	var seen string
	require.NoError(t, s.Stage(t.Context(), bytes.NewReader(data), sha, []byte("A=1\n"), func(dir string) ([]byte, error) {
		seen = dir
		_, err := os.Stat(filepath.Join(dir, "compose.yaml"))
		require.NoError(t, err, "the bundle is extracted when the labels are computed")
		return []byte("services: {}\n"), nil
	}))
	assert.NotEqual(t, s.Dir(sha), seen, "computed in the staging directory")
	got, err := os.ReadFile(filepath.Join(s.Dir(sha), bundle.LabelsFileName))
	require.NoError(t, err)
	assert.Equal(t, "services: {}\n", string(got))
	assert.Equal(t, []string{"compose.yaml", bundle.LabelsFileName}, s.ComposeFiles(sha, []string{"compose.yaml"}))

	// No labels (nil bytes): no file, and the manifest's compose files alone.
	other := staged(t, s, 2, time.Now())
	_, err = os.Stat(filepath.Join(s.Dir(other), bundle.LabelsFileName))
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Equal(t, []string{"compose.yaml"}, s.ComposeFiles(other, []string{"compose.yaml"}))

	// A failure leaves nothing half-written.
	data3, sha3 := makeBundle(t, 3)
	err = s.Stage(t.Context(), bytes.NewReader(data3), sha3, nil, func(string) ([]byte, error) { return nil, errors.New("boom") })
	require.ErrorContains(t, err, "digest the configs and secrets")
	assert.False(t, s.Has(sha3))
	_, err = os.Stat(filepath.Join(s.Releases(), "."+sha3+".tmp"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestStageRefusesWhatIsNotTheSHA(t *testing.T) {
	s := New(t.TempDir(), nil)
	data, _ := makeBundle(t, 1)
	_, other := makeBundle(t, 2)
	err := s.Stage(t.Context(), bytes.NewReader(data), other, nil, nil)
	require.Error(t, err)
	assert.False(t, s.Has(other))
	entries, _ := os.ReadDir(filepath.Join(s.DeployDir, "releases"))
	assert.Empty(t, entries, "nothing half-written is left")
	assert.Error(t, s.Stage(t.Context(), bytes.NewReader(data), "../x", nil, nil))
}

// TestLiveTransitions: every change of what the box serves, as the store computes it.
func TestLiveTransitions(t *testing.T) {
	s := New(t.TempDir(), nil)
	a, b := staged(t, s, 1, time.Now()), staged(t, s, 2, time.Now())
	now := time.Now()

	live, err := s.Promote(Live{}, a, 1, now)
	require.NoError(t, err)
	assert.Equal(t, Live{SHA: a, Serial: 1}, live)
	assert.Equal(t, a, s.Current())
	live = Confirm(live)
	assert.True(t, live.Confirmed)

	live, err = s.Promote(live, b, 2, now)
	require.NoError(t, err)
	assert.Equal(t, Live{SHA: b, Serial: 2, Previous: a}, live, "promote: the live one becomes previous, the new one unconfirmed")
	assert.True(t, s.CanRestore(live))

	restored, err := s.Restore(live)
	require.NoError(t, err)
	assert.Equal(t, Live{SHA: a, Serial: 1}, restored, "restore: previous is live again, unconfirmed, nothing before it")
	assert.Equal(t, a, s.Current())
	assert.False(t, s.CanRestore(restored))
	_, err = s.Restore(restored)
	assert.Error(t, err, "nothing left to restore")

	down, err := s.Down(Confirm(restored))
	require.NoError(t, err)
	assert.Equal(t, Live{Previous: a}, down, "down: nothing live, the taken-down release is previous")
	assert.Empty(t, s.Current())

	first, err := s.Promote(down, b, 2, now)
	require.NoError(t, err)
	assert.Equal(t, Live{SHA: b, Serial: 2}, first, "after a down the box served nothing: no previous")
	discarded, err := s.Discard(first)
	require.NoError(t, err)
	assert.Equal(t, Live{}, discarded, "discard: nothing live, nothing before")
	assert.True(t, s.Has(b), "the failed release stays staged")

	_, err = s.Promote(Live{}, strings.Repeat("0", 64), 9, now)
	assert.Error(t, err, "a release that is not staged cannot be promoted")
}

// TestRepair: current is the truth; leftovers are swept; a release moved aside by an
// interrupted restage comes back.
func TestRepair(t *testing.T) {
	s := New(t.TempDir(), nil)
	a, b := staged(t, s, 1, time.Now()), staged(t, s, 2, time.Now())
	rel := filepath.Join(s.DeployDir, "releases")
	require.NoError(t, os.WriteFile(filepath.Join(rel, "."+a+".bundle"), []byte("x"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(rel, "."+a+".tmp"), 0o755))
	require.NoError(t, os.Rename(s.Dir(b), filepath.Join(rel, "."+b+".old")))

	tests := []struct {
		name    string
		current string
		believe Live
		want    Live
	}{
		{"agree", a, Live{SHA: a, Serial: 1, Confirmed: true}, Live{SHA: a, Serial: 1, Confirmed: true}},
		{"crash after promote", b, Live{SHA: a, Serial: 1, Confirmed: true}, Live{SHA: b, Serial: 2, Previous: a}},
		{"crash after restore", a, Live{SHA: b, Serial: 2, Previous: a}, Live{SHA: a, Serial: 1}},
		{"crash after down", "", Live{SHA: a, Serial: 1, Previous: b, Confirmed: true}, Live{Previous: b}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Repair(tt.believe) // the first run also puts b back
			if tt.current == "" {
				require.NoError(t, os.Remove(s.CurrentLink()))
			} else {
				require.NoError(t, s.point(tt.current))
			}
			got := s.Repair(tt.believe)
			assert.Equal(t, tt.want, got)
		})
	}
	assert.ElementsMatch(t, []string{a, b}, names(t, rel), "leftovers swept, the moved-aside release back")
}

func TestPruneKeepsTheNewestAndNeverLiveOrPrevious(t *testing.T) {
	s := New(t.TempDir(), nil)
	var shas []string
	for i := range 5 {
		shas = append(shas, staged(t, s, i+1, time.Now().Add(time.Duration(i)*time.Minute)))
	}
	// The live one is the oldest: it is kept whatever its age.
	cur := Live{SHA: shas[0], Previous: shas[1]}
	pruned := s.Prune(cur, 3)
	assert.ElementsMatch(t, shas[2:4], pruned)
	for _, sha := range []string{shas[0], shas[1], shas[4]} {
		assert.True(t, s.Has(sha), Short(sha))
	}
	assert.Empty(t, s.Prune(cur, 3), "nothing more to prune")
	assert.Len(t, s.Prune(Live{SHA: shas[0]}, 1), 2, "keep 1: only the live one")
}

func TestEnvValues(t *testing.T) {
	s := New(t.TempDir(), nil)
	data, sha := makeBundle(t, 1)
	require.NoError(t, s.Stage(t.Context(), bytes.NewReader(data), sha, []byte("DB_PASSWORD='p w'\nOTHER=x\n"), nil))
	got, err := s.EnvValues(sha, []string{"DB_PASSWORD", "MISSING"})
	require.NoError(t, err)
	assert.Equal(t, []string{"p w"}, got)
	_, err = s.EnvValues(strings.Repeat("a", 64), []string{"X"})
	assert.Error(t, err)
}

func TestStaged(t *testing.T) {
	dir := t.TempDir()
	s := New(dir, nil)
	assert.Empty(t, s.Staged(), "no releases directory yet")
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, name := range []string{b, a, "." + a + ".tmp", "not-a-sha"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "releases", name), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "releases", "."+a+".bundle"), nil, 0o600))
	assert.Equal(t, []string{a, b}, s.Staged())
}
