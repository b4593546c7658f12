package release

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bundle"
)

// theSecret is the value the test releases' .env hold.
const theSecret = "hunter2-rendered-secret"

// threeStaged stages three releases with a secret (serials 1 to 3, at now) and
// promotes the first two in turn: the live release is b, the previous one a.
func threeStaged(t *testing.T, s *Store, now time.Time) (a, b, c string, live Live) {
	t.Helper()
	a, b, c = staged(t, s, 1, now), staged(t, s, 2, now), staged(t, s, 3, now)
	live, err := s.Promote(Live{}, a, 1, now)
	require.NoError(t, err)
	live, err = s.Promote(Confirm(live), b, 2, now)
	require.NoError(t, err)
	return a, b, c, live
}

// secretsUnder lists the files under dir (symlinks not followed) that hold theSecret.
func secretsUnder(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return filepath.SkipDir
		}
		require.NoError(t, err)
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		if bytes.Contains(data, []byte(theSecret)) {
			rel, _ := filepath.Rel(dir, p)
			found = append(found, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return found
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// failing makes removals of the paths stuck matches fail with EACCES, as a file a
// container wrote under another uid does, and records the paths each removal was
// asked for. A removeAll that fails first removes what it can of the tree but stuck
// paths, as os.RemoveAll does.
type failing struct {
	t     *testing.T
	stuck func(path string) bool
	calls []string
}

func (f *failing) install(s *Store) {
	s.remove = func(p string) error {
		f.calls = append(f.calls, "remove "+p)
		if f.stuck(p) {
			return &fs.PathError{Op: "remove", Path: p, Err: syscall.EACCES}
		}
		return os.Remove(p)
	}
	s.removeAll = func(p string) error {
		f.calls = append(f.calls, "removeAll "+p)
		var blocked []string
		err := filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if f.stuck(q) {
				blocked = append(blocked, q)
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				return os.Remove(q)
			}
			return nil
		})
		require.NoError(f.t, err)
		if len(blocked) > 0 {
			return &fs.PathError{Op: "unlinkat", Path: blocked[0], Err: syscall.EACCES}
		}
		return os.RemoveAll(p)
	}
}

// TestPurgeLeavesNoSecret: a purge removes current, every release with its .env and
// every leftover of an interrupted apply (a staging directory with a .env and a
// half-written copy of it, a release moved aside, a download), and nothing that is
// not the store's; the store then serves nothing and has nothing to restore.
func TestPurgeLeavesNoSecret(t *testing.T) {
	s := New(t.TempDir(), nil)
	now := time.Now()
	a, b, c := staged(t, s, 1, now.Add(-2*time.Minute)), staged(t, s, 2, now.Add(-time.Minute)), staged(t, s, 3, now)
	live, err := s.Promote(Live{}, b, 2, now)
	require.NoError(t, err)
	live, err = s.Promote(Confirm(live), c, 3, now)
	require.NoError(t, err)

	rel := s.Releases()
	tmp := filepath.Join(rel, "."+a+".tmp")
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "conf"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, ".env"), []byte("X="+theSecret), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "..env.tmp-0123456789abcdef"), []byte("X="+theSecret), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(rel, "."+b+".old"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(rel, "."+b+".old", ".env"), []byte("X="+theSecret), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(rel, "."+a+".bundle"), []byte("tar"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(rel, "README"), []byte("an operator's note"), 0o644))
	require.NotEmpty(t, secretsUnder(t, s.DeployDir), "the releases hold the secret before the purge")

	got, p, err := s.Purge(live)
	require.NoError(t, err)
	assert.Equal(t, Live{}, got, "nothing live, nothing to restore")
	assert.Empty(t, secretsUnder(t, s.DeployDir))
	assert.Empty(t, s.Current())
	assert.Empty(t, s.Staged())
	assert.Equal(t, []string{"README"}, names(t, rel), "what is not the store's stays, and so does releases/")
	assert.True(t, s.Tidy())
	assert.ElementsMatch(t, []string{a, b, c}, p.Releases)
	assert.Equal(t, 6, p.EnvFiles, "three releases, the staging directory's .env and its half-written copy, the moved-aside release's")
	assert.ElementsMatch(t, []string{"." + a + ".tmp", "." + b + ".old", "." + a + ".bundle"}, p.Leftovers)
	assert.Empty(t, p.Stuck)
	assert.NotContains(t, p.String(), theSecret)
	for _, sha := range []string{a, b, c} {
		assert.Contains(t, p.String(), "releases/"+Short(sha))
	}
	assert.Contains(t, p.String(), "removed 3 releases")
	assert.Contains(t, p.String(), "6 .env files")

	// A second purge (the next tick's, tenancy still asking) finds nothing.
	got, p, err = s.Purge(got)
	require.NoError(t, err)
	assert.Equal(t, Live{}, got)
	assert.Equal(t, Purged{}, p)
	assert.Equal(t, "nothing was left to remove under deploy_dir", p.String())
}

// TestPurgeThatCannotRemoveASecret: a .env that cannot be removed keeps its release
// staged whole (the release taken down stays the previous one), and the error says so; a
// directory whose .env went but whose rest cannot be removed is out of the store's
// view, holds no secret, and the next repair removes it.
func TestPurgeThatCannotRemoveASecret(t *testing.T) {
	s, now := New(t.TempDir(), nil), time.Now()
	a, b, c, live := threeStaged(t, s, now)
	// A container wrote data/ under c's release; b's .env cannot be removed.
	require.NoError(t, os.MkdirAll(filepath.Join(s.Dir(c), "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir(c), "data", "db"), []byte("rows"), 0o644))
	f := &failing{t: t, stuck: func(p string) bool {
		return p == filepath.Join(s.Dir(b), ".env") || filepath.Base(p) == "data"
	}}
	f.install(s)

	got, p, err := s.Purge(live)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.EACCES)
	assert.Contains(t, err.Error(), filepath.Join(s.Dir(b), ".env"), "the error names the file")
	assert.Empty(t, s.Current())
	assert.Equal(t, Live{Previous: b}, got, "the release taken down is still staged whole: still the previous one")
	assert.Equal(t, []string{b}, s.Staged())
	assert.Equal(t, []string{filepath.Join("releases", b, ".env")}, secretsUnder(t, s.DeployDir), "only the .env that could not be removed")
	assert.ElementsMatch(t, []string{a, c}, p.Releases)
	gone := filepath.Join(s.Releases(), "."+c+goneSuffix)
	assert.Equal(t, []string{gone}, p.Stuck)
	assert.Contains(t, p.String(), "could not be removed whole")
	assert.False(t, s.Tidy(), "the stuck directory is a leftover")

	// The file system is fixed: the next tick's repair removes the leftover, and the
	// next purge the release.
	s.remove, s.removeAll = os.Remove, os.RemoveAll
	got = s.Repair(got)
	assert.Equal(t, Live{Previous: b}, got)
	assert.NoDirExists(t, gone)
	got, p, err = s.Purge(got)
	require.NoError(t, err)
	assert.Equal(t, Live{}, got)
	assert.Equal(t, []string{b}, p.Releases)
	assert.Empty(t, secretsUnder(t, s.DeployDir))
}

// TestPruneRemovesTheEnvFirst: a prune takes each release's .env before anything
// else of it, so that a prune stopped half-way (here: a file a container wrote that
// cannot be removed) has removed the secret already and leaves no release the store
// counts without it; a .env that cannot be removed keeps its release whole.
func TestPruneRemovesTheEnvFirst(t *testing.T) {
	tests := []struct {
		name string
		// stuck is what cannot be removed, under the dir of the release pruned.
		stuck      string
		wantPruned bool
		wantSecret bool
	}{
		{name: "everything goes", wantPruned: true},
		{name: "a file a container wrote stays", stuck: "data", wantPruned: true},
		{name: "the .env stays", stuck: ".env", wantSecret: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t.TempDir(), nil)
			now := time.Now()
			old := staged(t, s, 1, now.Add(-time.Hour))
			prev, cur := staged(t, s, 2, now.Add(-time.Minute)), staged(t, s, 3, now)
			require.NoError(t, os.MkdirAll(filepath.Join(s.Dir(old), "data"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(s.Dir(old), "data", "db"), []byte("rows"), 0o644))
			f := &failing{t: t, stuck: func(p string) bool { return tt.stuck != "" && filepath.Base(p) == tt.stuck }}
			f.install(s)
			envCheck := s.removeAll
			s.removeAll = func(p string) error {
				_, err := os.Lstat(filepath.Join(p, ".env"))
				assert.ErrorIs(t, err, fs.ErrNotExist, "the .env is gone before the tree is removed: %s", p)
				return envCheck(p)
			}

			pruned := s.Prune(Live{SHA: cur, Previous: prev}, 2)

			assert.Equal(t, tt.wantPruned, slices.Equal([]string{old}, pruned), "pruned %v", pruned)
			assert.Equal(t, !tt.wantPruned, s.Has(old), "a release the prune could not take the .env of stays staged")
			kept := []string{prev, cur}
			if !tt.wantPruned {
				kept = append(kept, old)
			}
			assert.ElementsMatch(t, kept, s.Staged())
			secrets := secretsUnder(t, s.DeployDir)
			if tt.wantSecret {
				assert.Contains(t, secrets, filepath.Join("releases", old, ".env"))
			} else {
				assert.NotContains(t, strings.Join(secrets, " "), old, "no secret of the pruned release is left")
			}
			assert.Len(t, secrets, len(kept), "the kept releases' .env, one each")
			removeOf := "remove " + filepath.Join(s.Dir(old), ".env")
			require.Contains(t, f.calls, removeOf)
			for _, call := range f.calls[:slices.Index(f.calls, removeOf)] {
				assert.NotContains(t, call, old, "nothing of the release is removed before its .env")
			}

			// The next tick's repair finishes a removal that stopped half-way.
			s.remove, s.removeAll = os.Remove, os.RemoveAll
			s.Repair(Live{SHA: cur, Previous: prev})
			assert.True(t, s.Tidy())
		})
	}
}

// TestRepairFinishesAnInterruptedRemoval: a crash between a release's .env and its
// rename (a prune or a purge) leaves a release without its .env; the next repair
// removes it and forgets it as the previous release, but leaves the live release
// alone whatever it lacks. A crash after the rename leaves a hidden leftover that
// the sweep removes.
func TestRepairFinishesAnInterruptedRemoval(t *testing.T) {
	s, now := New(t.TempDir(), nil), time.Now()
	a, b, c, live := threeStaged(t, s, now)
	require.Equal(t, Live{SHA: b, Serial: 2, Previous: a}, live)

	// The purge removed current and a's .env, then stopped; c was renamed away.
	require.NoError(t, os.Remove(s.CurrentLink()))
	require.NoError(t, os.Remove(filepath.Join(s.Dir(a), bundle.EnvFileName)))
	require.NoError(t, os.Remove(filepath.Join(s.Dir(c), bundle.EnvFileName)))
	require.NoError(t, os.Rename(s.Dir(c), filepath.Join(s.Releases(), "."+c+goneSuffix)))

	got := s.Repair(live)
	assert.Equal(t, Live{}, got, "a is gone: nothing to restore")
	assert.Equal(t, []string{b}, s.Staged(), "b still has its .env: a release")
	assert.True(t, s.Tidy())

	// The live release without its .env (removed by hand) is not the repair's to remove.
	live, err := s.Promote(got, b, 2, now)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(s.Dir(b), bundle.EnvFileName)))
	assert.Equal(t, live, s.Repair(live))
	assert.True(t, s.Has(b))
}
