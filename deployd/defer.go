package deployd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/hold"
	"github.com/monky/monky-deployd/internal/release"
)

// This file is a deferred apply (docs/OPERATIONS.md, "Holds and windows"): under a
// hold, or outside the apply windows, an apply is prepared (signature, download,
// verify, pull: everything before the lease) and not switched. The verified bundle is
// kept under Config.PreparedDir, so that the switch does not download it again. No
// lease is taken, nothing is reported: a deferral is not a failure, the tick exits 0.

// Why a box defers an apply: Deferral.Why.
const (
	// DeferHold: a person at the box set a hold.
	DeferHold = "hold"
	// DeferWindow: the time is outside the config's apply windows.
	DeferWindow = "window"
)

// deferCause is why an apply waits now; nil when it does not.
type deferCause struct {
	why    string
	owner  string
	reason string
	until  time.Time
}

// deferCauseAt is why an apply would wait at now: an active hold (unless tenancy
// overrides holds), else a closed window. A hold file the agent does not trust is
// logged and ignored.
func (a *Agent) deferCauseAt(now time.Time, overrideHold bool) *deferCause {
	return a.deferCauseLog(now, overrideHold, true)
}

// deferCauseLog is deferCauseAt; with logIt false, what it finds is not logged (the
// check-in asks before the apply does).
func (a *Agent) deferCauseLog(now time.Time, overrideHold, logIt bool) *deferCause {
	if h, ok := a.activeHold(now, logIt); ok {
		if !overrideHold {
			return &deferCause{why: DeferHold, owner: h.Owner, reason: a.red.Redact(h.Reason), until: h.End(time.Duration(a.cfg.Holds.Max))}
		}
		if logIt {
			a.log.Warn("tenancy overrides the hold (override_hold in the check-in answer): applying although the box is held",
				"owner", h.Owner, "reason", a.red.Redact(h.Reason), "until", h.End(time.Duration(a.cfg.Holds.Max)))
		}
	}
	if open, next := a.cfg.windowSet().Open(now); !open {
		return &deferCause{why: DeferWindow, until: next}
	}
	return nil
}

// activeHold reads the hold file and reports whether it holds the box at now.
func (a *Agent) activeHold(now time.Time, logIt bool) (hold.Hold, bool) {
	h, err := hold.Read(a.cfg.Holds.Dir)
	var refused *hold.RefusedError
	switch {
	case errors.Is(err, hold.ErrNone):
		return hold.Hold{}, false
	case err != nil && !logIt:
		return hold.Hold{}, false
	case errors.As(err, &refused):
		a.log.Error("the hold file is refused and ignored: the box applies as if there were no hold. Remove it and set the hold again with `monky-deployd hold`",
			"path", refused.Path, "why", refused.Why)
		return hold.Hold{}, false
	case err != nil:
		a.log.Error("the hold directory cannot be read; the box applies as if there were no hold. Fix its mode (root:monky-hold 2770)",
			"dir", a.cfg.Holds.Dir, "err", err)
		return hold.Hold{}, false
	}
	max := time.Duration(a.cfg.Holds.Max)
	if !h.Active(now, max) {
		return hold.Hold{}, false
	}
	if h.Cut(max) {
		a.log.Debug("the hold is longer than holds.max; it ends at set_at + holds.max", "owner", h.Owner, "end", h.End(max), "holds_max", max)
	}
	return h, true
}

// deferral decides whether the tick's apply of inst waits: nil when it goes on (and
// the state's deferral, if any, ends: the switch begins).
func (t *tick) deferral(inst tenancy.Instruction) *deferCause {
	c := t.a.deferCauseAt(t.a.now(), inst.OverrideHold)
	if c == nil && t.st.Deferral != nil {
		d := t.st.Deferral
		t.log.Info("the deferral ended: switching to the prepared release", "why", d.Why, "deferred_since", d.Since)
		t.st.Deferral = nil
		t.a.publishDeferral(nil)
	}
	return c
}

// deferApply prepares inst without switching to it: everything before the lease, the
// bundle kept for the switch. A step's error ends it as it would end an apply (a
// refused bundle is reported); a deferral ends 0 and reports nothing.
func (t *tick) deferApply(ctx context.Context, inst tenancy.Instruction, c *deferCause) error {
	d := t.st.Deferral
	if d == nil || d.SHA != inst.SHA {
		d = &Deferral{SHA: inst.SHA, Serial: inst.Serial, Since: t.a.now()}
	}
	t.out.Deferred = c.why
	if !d.Prepared || !t.a.keptValid(t.st, inst.SHA, false) {
		if err := t.prepareDeferred(ctx, inst); err != nil {
			return err
		}
	}
	d.Why, d.Owner, d.Reason, d.Until, d.Prepared = c.why, c.owner, c.reason, c.until, true
	t.st.Deferral = d
	t.a.publishDeferral(d)
	t.log.Info("apply deferred: the bundle is verified, kept and its images pulled; no lease taken, nothing reported. The switch happens when the "+c.why+" allows it (monky-deployd hold --clear ends a hold)",
		"why", c.why, "owner", c.owner, "reason", c.reason, "until", c.until)
	return nil
}

// prepareDeferred is prepare and the image pulls of inst, with the bundle kept under
// PreparedDir instead of removed.
func (t *tick) prepareDeferred(ctx context.Context, inst tenancy.Instruction) error {
	b, err := t.prepare(ctx, inst)
	if err != nil {
		return err
	}
	if err := t.keep(b.file, inst.SHA); err != nil {
		t.log.Warn("could not keep the verified bundle; the switch downloads it again", "dir", t.a.cfg.PreparedDir(), "err", err)
	}
	if err := t.boxReady(ctx); err != nil {
		return err
	}
	return t.pullImages(ctx, b.res.Images)
}

// keptPath is where the verified bundle of sha is kept.
func (a *Agent) keptPath(sha string) string {
	return filepath.Join(a.cfg.PreparedDir(), sha+".bundle")
}

// keep moves the verified download d of sha to PreparedDir (removing any other kept
// bundle) and records its digest; d is closed either way.
func (t *tick) keep(d download, sha string) error {
	defer d.close() // removes a download that was not moved; leaves the kept copy (fetch)
	t.a.dropKept(t.st, sha)
	if err := fsutil.MkdirMode(t.a.cfg.PreparedDir(), 0o700); err != nil {
		return err
	}
	p := t.a.keptPath(sha)
	if d.Name() == p {
		return nil // already the kept copy: fetch made its remove a no-op
	}
	digest, size, err := digestOf(d.File)
	if err != nil {
		return err
	}
	if err := os.Rename(d.Name(), p); err != nil {
		return err
	}
	t.st.Kept = &KeptBundle{SHA: sha, Digest: digest, Size: size}
	return nil
}

// digestOf is the hex sha256 and the size of f's bytes.
func digestOf(f *os.File) (string, int64, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// keptValid reports whether the kept bundle of sha is there, as kept: the size only
// (a later deferred tick), or the digest too (full, at the switch).
func (a *Agent) keptValid(st *State, sha string, full bool) bool {
	k := st.Kept
	if k == nil || k.SHA != sha {
		return false
	}
	f, err := os.Open(a.keptPath(sha))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }() // read-only
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != k.Size {
		return false
	}
	if !full {
		return true
	}
	digest, _, err := digestOf(f)
	return err == nil && digest == k.Digest
}

// dropKept removes every kept bundle but the one of keepSHA ("": all).
func (a *Agent) dropKept(st *State, keepSHA string) {
	entries, err := os.ReadDir(a.cfg.PreparedDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Name() == keepSHA+".bundle" && keepSHA != "" {
			continue
		}
		if err := os.Remove(filepath.Join(a.cfg.PreparedDir(), e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("could not remove a kept bundle; the next deferral tries again", "dir", a.cfg.PreparedDir(), "err", err)
		}
	}
	if st.Kept != nil && st.Kept.SHA != keepSHA {
		st.Kept = nil
	}
}

// fetch is the bundle of sha for prepare: the copy a deferral kept when its digest
// still matches (no second download), else a download. Closing the kept copy leaves it
// in place (tidyKept removes it).
func (t *tick) fetch(ctx context.Context, sha string) (download, error) {
	if t.a.keptValid(t.st, sha, true) {
		f, err := os.Open(t.a.keptPath(sha))
		if err == nil {
			t.log.Info("using the bundle a deferral kept (digest checked); not downloading it again", "sha", release.Short(sha))
			// Closing it leaves it kept: tidyKept removes it once the sha is live and
			// healthy, so that a switch that ends on 75 goes on from it.
			return download{File: f, remove: func() {}}, nil
		}
	}
	if t.st.Kept != nil && t.st.Kept.SHA == sha {
		t.log.Warn("the kept bundle is missing or changed since it was verified; downloading it again", "dir", t.a.cfg.PreparedDir())
		t.a.dropKept(t.st, "")
	}
	return t.download(ctx, sha)
}

// tidyKept removes the kept bundle once its sha is live and confirmed: the switch is
// done. A tick calls it at its end.
func (t *tick) tidyKept() {
	if k := t.st.Kept; k != nil && k.SHA == t.st.LiveSHA && t.st.Confirmed {
		t.a.dropKept(t.st, "")
	}
}

// settleDeferral ends the state's deferral when tenancy no longer asks for its sha
// (another sha, none, down): nothing waits any more. The kept bundle of another sha
// is removed.
func (t *tick) settleDeferral(inst tenancy.Instruction) {
	d := t.st.Deferral
	if d == nil || (inst.Action == tenancy.ActionApply && inst.SHA == d.SHA) {
		return
	}
	t.log.Info("tenancy no longer asks for the deferred sha; the deferral ends", "sha", release.Short(d.SHA), "action", inst.Action)
	t.st.Deferral = nil
	t.a.dropKept(t.st, inst.SHA)
	t.a.publishDeferral(nil)
}

// deferredForCheckin is the state's deferral as the check-in carries it: nil when
// there is none, or when its cause has passed at now (the tick is about to switch).
func (a *Agent) deferredForCheckin(st *State, now time.Time) *tenancy.Deferred {
	d := st.Deferral
	if d == nil || a.deferCauseLog(now, false, false) == nil {
		return nil
	}
	c := *d // a copy: the tick goes on changing the state's
	return &c
}
