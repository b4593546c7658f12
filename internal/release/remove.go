package release

// Removing what the store wrote without leaving a secret behind. A release directory
// holds the bundle's files (no values: bundles never carry them), the labels
// (digests only) and the rendered .env (the secret values). Every removal — a purge,
// a prune, a repair, a restage — takes the .env first, then renames a release out of
// the store's view, then removes the rest: a removal that stops half-way (a crash, a
// file a container wrote that cannot be removed) leaves either a whole release the
// store still counts, or a directory without a secret.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// goneSuffix names a release renamed out of the store's view by a removal whose
// secrets are already gone: releases/.<sha>.gone. Repair removes a leftover one.
const goneSuffix = ".gone"

// holdsSecret reports whether a file of a release or staging directory may hold a
// secret value: the rendered .env, or the temporary copy fsutil.WriteFileAtomic
// writes it through ("..env.tmp-<hex>"), which a crash during a stage can leave.
func holdsSecret(name string) bool {
	return name == bundle.EnvFileName || strings.HasPrefix(name, "."+bundle.EnvFileName+".tmp-")
}

// removal is what removing one directory did.
type removal struct {
	// envFiles is how many files holding secret values were removed.
	envFiles int
	// err: the secrets could not all be removed. Nothing else was touched: a release
	// is still a release, with what is left of its .env.
	err error
	// stuck is the path that is left without its secrets because the rest could not
	// be removed (rest says why); "" when all is gone. Repair tries again.
	stuck string
	rest  error
}

// clearSecrets removes the files of dir that may hold a secret value (holdsSecret),
// durably, and returns how many it removed. A dir that does not exist holds none.
func (s *Store) clearSecrets(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !holdsSecret(e.Name()) {
			continue
		}
		if err := s.remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	if n > 0 {
		// The removal is on disk before the directory leaves the store's view.
		if err := fsutil.SyncDir(dir); err != nil {
			return n, err
		}
	}
	return n, nil
}

// removeTree removes a hidden leftover under releases/ (a staging directory, a
// release moved aside or renamed away, a download, an unpacked plan): its secrets
// first, then the rest.
func (s *Store) removeTree(path string) removal {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return removal{}
	}
	if err != nil {
		return removal{err: err}
	}
	if !fi.IsDir() {
		// A download or a stray file: the bundle's bytes, no value.
		if err := s.remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removal{stuck: path, rest: err}
		}
		return removal{}
	}
	n, err := s.clearSecrets(path)
	if err != nil {
		return removal{envFiles: n, err: err}
	}
	if err := s.removeAll(path); err != nil {
		return removal{envFiles: n, stuck: path, rest: err}
	}
	return removal{envFiles: n}
}

// removeRelease removes the staged release sha: its .env first (on failure the
// release stays whole and staged), then it is renamed to releases/.<sha>.gone, out of
// the store's view, then removed. A rename that fails leaves it in place without its
// .env; Repair finishes both.
func (s *Store) removeRelease(sha string) removal {
	if !ids.ValidSHA(sha) {
		return removal{err: fmt.Errorf("release: %q is not a bundle sha", sha)}
	}
	dir := s.Dir(sha)
	n, err := s.clearSecrets(dir)
	if err != nil {
		return removal{envFiles: n, err: err}
	}
	gone := filepath.Join(s.Releases(), "."+sha+goneSuffix)
	if err := os.Rename(dir, gone); err != nil {
		// Out of view or not, no secret is left in it: remove it where it is.
		if rerr := s.removeAll(dir); rerr != nil {
			return removal{envFiles: n, stuck: dir, rest: errors.Join(err, rerr)}
		}
		return removal{envFiles: n}
	}
	_ = fsutil.SyncDir(s.Releases()) // best effort: a release back after a crash has no .env, and Repair removes it
	if err := s.removeAll(gone); err != nil {
		return removal{envFiles: n, stuck: gone, rest: err}
	}
	return removal{envFiles: n}
}

// finishRemovals removes the releases whose .env is gone, which only a removal that
// stopped half-way leaves (a crash between the .env and the rename, a rename that
// failed): a release without its .env is no release compose can bring up. The
// release current points to is left alone, whatever it lacks.
func (s *Store) finishRemovals() {
	live := s.Current()
	for _, sha := range s.Staged() {
		if sha == live {
			continue
		}
		if _, err := os.Lstat(filepath.Join(s.Dir(sha), bundle.EnvFileName)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		r := s.removeRelease(sha)
		switch {
		case r.err != nil:
			s.log.Warn("could not finish removing a release whose .env is already gone; the next tick tries again", "path", s.Dir(sha), "err", r.err)
		case r.stuck != "":
			s.log.Warn("finished removing a release whose .env was already gone, but part of it could not be removed; it holds no secret, the next tick tries again",
				"path", r.stuck, "err", r.rest)
		default:
			s.log.Info("finished removing a release whose .env was already gone (an interrupted prune or purge)", "sha", Short(sha))
		}
	}
}

// Purged is what a purge removed under deploy_dir: names and counts, never a value.
type Purged struct {
	// Releases are the shas of the releases removed, each with its .env.
	Releases []string
	// EnvFiles is how many files holding secret values were removed: the releases'
	// .env and those in leftovers of interrupted applies.
	EnvFiles int
	// Leftovers are the names (under releases/) of the leftovers of interrupted
	// applies removed: downloads, staging directories, releases moved aside.
	Leftovers []string
	// Stuck are the paths left without their secrets that could not be removed whole
	// (a file a container wrote); the next tick's repair tries again.
	Stuck []string
}

// String says what the purge removed, for a report's detail: counts and release
// paths relative to deploy_dir, never a value.
func (p Purged) String() string {
	if len(p.Releases) == 0 && len(p.Leftovers) == 0 && p.EnvFiles == 0 && len(p.Stuck) == 0 {
		return "nothing was left to remove under deploy_dir"
	}
	paths := make([]string, len(p.Releases))
	for i, sha := range p.Releases {
		paths[i] = filepath.Join("releases", Short(sha))
	}
	s := fmt.Sprintf("removed %d %s", len(p.Releases), plural(len(p.Releases), "release", "releases"))
	if len(paths) > 0 {
		s += " (" + strings.Join(paths, ", ") + ")"
	}
	s += fmt.Sprintf(" and %d .env %s", p.EnvFiles, plural(p.EnvFiles, "file", "files"))
	if len(p.Leftovers) > 0 {
		s += fmt.Sprintf(", and %d %s of interrupted applies", len(p.Leftovers), plural(len(p.Leftovers), "leftover", "leftovers"))
	}
	if len(p.Stuck) > 0 {
		s += fmt.Sprintf("; %d %s without secrets could not be removed whole (%s), the next tick tries again",
			len(p.Stuck), plural(len(p.Stuck), "directory", "directories"), strings.Join(p.Stuck, ", "))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Purge removes current and everything the store holds under releases/: every
// release with its .env (each as removeRelease does: the .env first) and every
// leftover of an interrupted apply. It is how a down with purge leaves no secret
// value under deploy_dir. The box serves nothing and has nothing to restore: the
// returned Live is the zero Live, or names as previous the release taken down when
// its .env could not be removed (it is then still staged whole). The error joins the
// failures to remove a secret; Purged says what was removed all the same.
func (s *Store) Purge(cur Live) (Live, Purged, error) {
	live, err := s.Down(cur)
	if err != nil {
		return cur, Purged{}, err
	}
	var p Purged
	entries, err := os.ReadDir(s.Releases())
	if errors.Is(err, fs.ErrNotExist) {
		return Live{}, p, nil
	}
	if err != nil {
		return live, p, err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		var r removal
		switch {
		case strings.HasPrefix(name, "."):
			r = s.removeTree(filepath.Join(s.Releases(), name))
			if r.err == nil {
				p.Leftovers = append(p.Leftovers, name)
			}
		case e.IsDir() && ids.ValidSHA(name):
			r = s.removeRelease(name)
			if r.err == nil {
				p.Releases = append(p.Releases, name)
			}
		default:
			continue // not the store's
		}
		p.EnvFiles += r.envFiles
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		if r.stuck != "" {
			s.log.Warn("purge: removed the secrets of a directory but not all of it; it holds no secret, the next tick tries again", "path", r.stuck, "err", r.rest)
			p.Stuck = append(p.Stuck, r.stuck)
		}
	}
	if !s.Has(live.Previous) {
		live.Previous = ""
	}
	return live, p, errors.Join(errs...)
}
