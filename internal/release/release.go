// Package release is the release store of a box: the directories
// <deploy_dir>/releases/<sha>/ (a bundle's files plus the rendered .env and labels) and the
// symlink <deploy_dir>/current that names the live one.
//
// It is the only code that writes them, and the only code that computes what the
// box serves: every change returns a Live value (the live release, the one before
// it, whether the live one was seen healthy) that the caller keeps in its state. It
// knows nothing of the agent, its state file or its errors: it takes a directory and
// returns values and plain errors.
//
// Every step is crash-safe: a release is staged in releases/.<sha>.tmp and renamed
// into place, current is swapped atomically, and Repair puts the store back in order
// after a crash at any point (a kill leaves the old or the new release live, never
// half of one). Every removal takes a release's .env first (remove.go), so that no
// removal that stops half-way leaves a secret value in a directory the store no
// longer counts as a release.
package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// Store is the release store under one deploy directory.
type Store struct {
	Dirs
	log *slog.Logger
	// remove and removeAll are os.Remove and os.RemoveAll; a test makes them fail
	// half-way, as a file a container wrote under another uid does.
	remove, removeAll func(string) error
}

// New returns the store under deployDir; nil log discards. It touches nothing.
func New(deployDir string, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{Dirs: Dirs{DeployDir: deployDir}, log: log, remove: os.Remove, removeAll: os.RemoveAll}
}

// Download creates releases/.<sha>.bundle (0600) for the bundle's bytes. The caller
// closes the file and calls the returned remove; Repair removes a leftover one.
func (s *Store) Download(sha string) (f *os.File, remove func(), err error) {
	if !ids.ValidSHA(sha) {
		return nil, nil, fmt.Errorf("release: %q is not a bundle sha", sha)
	}
	if err := fsutil.MkdirMode(s.Releases(), 0o755); err != nil {
		return nil, nil, err
	}
	p := filepath.Join(s.Releases(), "."+sha+".bundle")
	f, err = os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return f, func() {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("could not remove the downloaded bundle; the next tick removes it", "path", p, "err", err)
		}
	}, nil
}

// Stage extracts the verified bundle r into releases/.<sha>.tmp (bundle.Extract
// checks paths and the sha again), writes env as its .env (0600) and what labels
// returns for the extracted files (nil labels, or nil bytes: none) as its
// bundle.LabelsFileName, and renames the directory to releases/<sha>. A release of
// the same sha is replaced whole: its .env may hold older secrets. On error nothing
// half-written is left in place.
func (s *Store) Stage(ctx context.Context, r io.Reader, sha string, env []byte, labels func(dir string) ([]byte, error)) error {
	if !ids.ValidSHA(sha) {
		return fmt.Errorf("release: %q is not a bundle sha", sha)
	}
	tmp := filepath.Join(s.Releases(), "."+sha+".tmp")
	if r := s.removeTree(tmp); r.err != nil {
		return r.err
	}
	if err := fsutil.MkdirMode(tmp, 0o755); err != nil { // container users read the release
		return err
	}
	if err := s.fill(ctx, r, tmp, sha, env, labels); err != nil {
		s.discardStaging(tmp)
		return err
	}
	return s.replace(tmp, sha)
}

// fill extracts the bundle and writes the .env and the labels into the staging
// directory.
func (s *Store) fill(ctx context.Context, r io.Reader, tmp, sha string, env []byte, labels func(string) ([]byte, error)) error {
	if err := bundle.Extract(ctx, r, tmp, sha, bundle.Limits{}); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(tmp, bundle.EnvFileName), env, 0o600); err != nil {
		return fmt.Errorf("write .env: %w", err)
	}
	if labels != nil {
		data, err := labels(tmp)
		if err != nil {
			return fmt.Errorf("digest the configs and secrets the services mount: %w", err)
		}
		if data != nil {
			if err := fsutil.WriteFileAtomic(filepath.Join(tmp, bundle.LabelsFileName), data, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", bundle.LabelsFileName, err)
			}
		}
	}
	return fsutil.SyncDir(tmp)
}

// ComposeFiles are the compose files the agent runs the release of sha with: the
// manifest's, then its bundle.LabelsFileName when the agent wrote one.
func (s *Store) ComposeFiles(sha string, manifest []string) []string {
	if _, err := os.Lstat(filepath.Join(s.Dir(sha), bundle.LabelsFileName)); err != nil {
		return manifest
	}
	return append(slices.Clone(manifest), bundle.LabelsFileName)
}

// replace renames the staged tmp to releases/<sha>, moving an existing copy aside
// first (releases/.<sha>.old) and putting it back when the rename fails.
func (s *Store) replace(tmp, sha string) error {
	final, old := s.Dir(sha), filepath.Join(s.Releases(), "."+sha+".old")
	moved := false
	if _, err := os.Stat(final); err == nil {
		if err := os.Rename(final, old); err != nil {
			s.discardStaging(tmp)
			return err
		}
		moved = true
	}
	if err := os.Rename(tmp, final); err != nil {
		s.discardStaging(tmp)
		if moved {
			// Put the kept release back: it may be the one a restore needs.
			if rerr := os.Rename(old, final); rerr != nil {
				s.log.Error("could not put a kept release back after a failed restage; the next tick's repair moves it back", "path", old, "err", rerr)
			}
		}
		return err
	}
	if moved {
		// The replaced copy's .env holds the older secrets: it goes first.
		if r := s.removeTree(old); r.err != nil || r.stuck != "" {
			s.log.Warn("could not remove the replaced copy of a release; the next tick removes it", "path", old, "err", errors.Join(r.err, r.rest))
		}
	}
	return fsutil.SyncDir(s.Releases())
}

// discardStaging removes a staging directory after a failed stage, its .env first; a
// leftover is the next tick's repair's.
func (s *Store) discardStaging(tmp string) {
	if r := s.removeTree(tmp); r.err != nil || r.stuck != "" {
		s.log.Warn("could not remove the staging directory of a failed stage; the next tick removes it", "path", tmp, "err", errors.Join(r.err, r.rest))
	}
}

// Promote makes the staged release sha live: current is swapped atomically and the
// release's time set to now (pruning keeps the newest). The live release becomes
// the previous one; the new one is not confirmed until it is seen healthy.
func (s *Store) Promote(cur Live, sha string, serial int64, now time.Time) (Live, error) {
	if err := s.point(sha); err != nil {
		return cur, err
	}
	_ = os.Chtimes(s.Dir(sha), now, now)
	return Live{SHA: sha, Serial: serial, Previous: cur.SHA}, nil
}

// Restore points current back at the previous release. The restored release is not
// confirmed until it is seen healthy again, and there is no previous one any more.
func (s *Store) Restore(cur Live) (Live, error) {
	if cur.Previous == "" || cur.Previous == cur.SHA || !s.Has(cur.Previous) {
		return cur, fmt.Errorf("release: there is no previous release to restore")
	}
	if err := s.point(cur.Previous); err != nil {
		return cur, err
	}
	return Live{SHA: cur.Previous, Serial: s.Serial(cur.Previous)}, nil
}

// CanRestore reports whether Restore has a previous release to go back to.
func (s *Store) CanRestore(cur Live) bool {
	return cur.Previous != "" && cur.Previous != cur.SHA && s.Has(cur.Previous)
}

// Confirm records that the live release was seen healthy.
func Confirm(cur Live) Live {
	cur.Confirmed = true
	return cur
}

// Discard removes current after a failed first apply: the box serves nothing, as it
// did before; the failed release stays staged.
func (s *Store) Discard(cur Live) (Live, error) {
	if err := s.unlink(); err != nil {
		return cur, err
	}
	return Live{Previous: cur.Previous}, nil
}

// Down removes current after the live release was taken down; that release becomes
// the previous one.
func (s *Store) Down(cur Live) (Live, error) {
	if err := s.unlink(); err != nil {
		return cur, err
	}
	prev := cur.Previous
	if cur.SHA != "" {
		prev = cur.SHA
	}
	return Live{Previous: prev}, nil
}

// point swaps current to releases/<sha> atomically.
func (s *Store) point(sha string) error {
	if !s.Has(sha) {
		return fmt.Errorf("release: %s is not staged", Short(sha))
	}
	return fsutil.SwapSymlink(filepath.Join("releases", sha), s.CurrentLink())
}

func (s *Store) unlink() error {
	if err := os.Remove(s.CurrentLink()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_ = fsutil.SyncDir(fsutil.ExistingParent(s.DeployDir))
	return nil
}

// Repair puts the store in order after a crash and returns what is live: leftovers
// of an interrupted apply (releases/.*) are removed (their .env first), a release
// moved aside by an interrupted restage is put back, a release whose .env an
// interrupted prune or purge already removed is removed, current is the truth about
// the live release (cur is what the caller believed), and a previous release that is
// no longer staged is forgotten: there is nothing to restore.
func (s *Store) Repair(cur Live) Live {
	s.sweep()
	s.finishRemovals()
	live := s.trustCurrent(cur)
	if live.Previous != "" && !s.Has(live.Previous) {
		s.log.Info("the previous release is no longer staged (purged, or removed by hand): there is none to restore",
			"previous_sha", Short(live.Previous))
		live.Previous = ""
	}
	return live
}

// trustCurrent is what is live by the current symlink, cur being what the caller
// believed.
func (s *Store) trustCurrent(cur Live) Live {
	sha := s.Current()
	if sha == cur.SHA {
		return cur
	}
	s.log.Warn("state and the live release disagree (an interrupted apply or down); trusting the current symlink",
		"state_live_sha", cur.SHA, "current_sha", sha)
	if sha == "" {
		return Live{Previous: cur.Previous}
	}
	prev := cur.Previous
	if prev == sha {
		prev = ""
	} else if cur.SHA != "" {
		prev = cur.SHA
	}
	return Live{SHA: sha, Serial: s.Serial(sha), Previous: prev}
}

// sweep removes the hidden leftovers of interrupted applies and puts back a release
// that an interrupted restage moved aside.
func (s *Store) sweep() {
	rel := s.Releases()
	entries, err := os.ReadDir(rel)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(rel, name)
		if sha, ok := strings.CutSuffix(name[1:], ".old"); ok && ids.ValidSHA(sha) {
			if _, err := os.Lstat(s.Dir(sha)); errors.Is(err, fs.ErrNotExist) {
				if rerr := os.Rename(p, s.Dir(sha)); rerr == nil {
					_ = fsutil.SyncDir(rel)
					s.log.Info("put back a release moved aside by an interrupted restage", "sha", Short(sha))
					continue
				} else {
					s.log.Warn("could not put back a release moved aside by an interrupted restage", "path", p, "err", rerr)
				}
			}
		}
		switch r := s.removeTree(p); {
		case r.err != nil:
			s.log.Warn("could not remove the .env of a leftover of an interrupted apply; the next tick tries again", "path", p, "err", r.err)
		case r.stuck != "":
			s.log.Warn("removed the .env of a leftover of an interrupted apply but not all of it; it holds no secret, the next tick tries again", "path", p, "err", r.rest)
		default:
			s.log.Info("removed a leftover of an interrupted apply", "path", p, "env_files", r.envFiles)
		}
	}
}

// Staged returns the shas of the staged releases (the directories under releases/),
// sorted.
func (s *Store) Staged() []string {
	entries, err := os.ReadDir(s.Releases())
	if err != nil {
		return nil
	}
	var shas []string
	for _, e := range entries {
		if e.IsDir() && ids.ValidSHA(e.Name()) {
			shas = append(shas, e.Name())
		}
	}
	return shas
}

// Prune keeps the newest keep releases in all, counting the live and the previous
// one (which are always kept), and returns the shas it removed. Each goes as
// removeRelease takes it: its .env first, so that a prune stopped half-way leaves
// the release whole (its .env could not be removed: pruned again after the next
// apply) or without a secret (the rest could not: the next tick's repair removes it).
func (s *Store) Prune(cur Live, keep int) []string {
	entries, err := os.ReadDir(s.Releases())
	if err != nil {
		return nil
	}
	type rel struct {
		sha string
		mod time.Time
	}
	var rels []rel
	for _, e := range entries {
		if !e.IsDir() || !ids.ValidSHA(e.Name()) || e.Name() == cur.SHA || e.Name() == cur.Previous {
			continue
		}
		if info, err := e.Info(); err == nil {
			rels = append(rels, rel{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].mod.After(rels[j].mod) })
	keep--
	if cur.Previous != "" {
		keep--
	}
	keep = max(keep, 0)
	var pruned []string
	for i, r := range rels {
		if i < keep {
			continue
		}
		rm := s.removeRelease(r.sha)
		switch {
		case rm.err != nil:
			s.log.Warn("could not remove the .env of an old release; it stays staged whole, the next apply prunes it again", "path", s.Dir(r.sha), "err", rm.err)
			continue
		case rm.stuck != "":
			s.log.Warn("pruned an old release, its .env first, but part of it could not be removed; it holds no secret, the next tick tries again",
				"sha", Short(r.sha), "path", rm.stuck, "err", rm.rest)
		default:
			s.log.Info("pruned an old release", "sha", Short(r.sha))
		}
		pruned = append(pruned, r.sha)
	}
	return pruned
}

// Read reads a staged release's manifest and services through bundle.ReadStaged.
func (s *Store) Read(ctx context.Context, sha string, exp bundle.Expect) (bundle.Staged, error) {
	if !s.Has(sha) {
		return bundle.Staged{}, fmt.Errorf("release %s is not staged", Short(sha))
	}
	return bundle.ReadStaged(ctx, s.Dir(sha), exp)
}

// Manifest reads a staged release's manifest.json (decoded and checked as Verify does).
func (s *Store) Manifest(sha string) (bundle.Manifest, error) {
	data, err := os.ReadFile(filepath.Join(s.Dir(sha), bundle.ManifestName))
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("read the release's manifest: %w", err)
	}
	return bundle.ParseManifest(data)
}

// Serial is the serial in a staged release's manifest; 0 when it cannot be read.
func (s *Store) Serial(sha string) int64 {
	m, err := s.Manifest(sha)
	if err != nil {
		return 0
	}
	return m.Serial
}

// EnvValues reads the values of the named variables from a staged release's .env,
// so that a caller that did not read them from OpenBao (a resume, a restore, a down)
// can still redact them. The parser's errors may quote a line (a secret value): they
// are not returned, only that the file could not be read.
func (s *Store) EnvValues(sha string, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	f, err := os.Open(filepath.Join(s.Dir(sha), bundle.EnvFileName))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	env, err := dotenv.Parse(f)
	if err != nil {
		return nil, errors.New("the release's .env does not parse")
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if v, ok := env[n]; ok {
			out = append(out, v)
		}
	}
	return out, nil
}
