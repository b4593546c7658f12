package deployd

import (
	"errors"
	"fmt"
	"os"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// loadState reads state.json. A file that reads but does not parse is moved aside
// (never a crash loop) and the state is rebuilt: from the live release on disk, and,
// for what must survive it (the replay ratchet, the failed shas, the latch), from the
// kept file written before every change of them (Config.KeepPath). A file that cannot
// be read (EACCES, EIO, a mount gone) is left as it is and the run ends on
// STATE_UNAVAILABLE: moving it aside would lose what it holds.
func (a *Agent) loadState() (State, error) {
	st, err := ReadState(a.cfg)
	if err == nil {
		if st.Schema == 0 {
			st.Schema = stateSchema
		}
		return st, nil
	}
	if errors.Is(err, fsutil.ErrNotRegular) {
		a.log.Error("the state file is not a regular file; leaving it as it is, exiting 1. Remove it: the next run rebuilds the state from the live release",
			"path", a.cfg.StatePath(), "err", err)
		return State{}, &Error{Op: "read state", Code: codes.StateUnavailable, Err: err}
	}
	if !errors.Is(err, ErrStateCorrupt) {
		a.log.Error("could not read the state file; leaving it as it is, exiting 1. Fix the file system (the err names the file); the next tick tries again",
			"path", a.cfg.StatePath(), "err", err)
		return State{}, &Error{Op: "read state", Code: codes.StateUnavailable, Err: err}
	}
	st = a.rebuildState(err)
	// Saved at once: a run that ends before its own save (the latch, a crash) must not
	// leave state.json missing, which reads as a new box: status would not tell the
	// latch, and the next run would lose what the kept file brought back.
	if serr := a.saveState(&st); serr != nil {
		a.log.Warn("could not save the rebuilt state; the run saves it again at its end", "path", a.cfg.StatePath(), "err", serr)
	}
	return st, nil
}

// rebuildState is the state of a box whose state.json did not parse (corrupt): it is
// moved aside, the live release is the one `current` points to (not known to be
// healthy: the next apply of it converges it without a lease), and what must survive
// comes back from the kept file.
func (a *Agent) rebuildState(corrupt error) State {
	st := State{Schema: stateSchema, EnvID: a.cfg.EnvID}
	st.LiveSHA = a.store.Current()
	st.LiveSerial = a.store.Serial(st.LiveSHA)
	r := &Rebuilt{At: a.now(), Why: a.red.Redact(corrupt.Error())}
	aside := fmt.Sprintf("%s.corrupt-%d", a.cfg.StatePath(), a.now().Unix())
	if rerr := os.Rename(a.cfg.StatePath(), aside); rerr != nil {
		r.Why += "; it could not be moved aside: " + rerr.Error()
	} else {
		r.Why += "; moved to " + aside
	}
	k, kerr := readKept(a.cfg.KeepPath())
	switch {
	case kerr != nil:
		r.Kept = "nothing: " + kerr.Error()
	case k.EnvID != "" && k.EnvID != a.cfg.EnvID:
		r.Kept = "nothing: " + a.cfg.KeepPath() + " is of " + k.EnvID
	default:
		st.SignedSerials, st.Failed, st.EnvMismatch = k.SignedSerials, k.Failed, k.EnvMismatch
		r.Kept = fmt.Sprintf("from %s: %d signed serials, %d failed shas, latch %t", a.cfg.KeepPath(), len(k.SignedSerials), len(k.Failed), k.EnvMismatch != nil)
	}
	st.Rebuilt = r
	a.log.Error("state.json did not parse; rebuilt the state from the live release and the kept file. Nothing to do unless it happens again (then check the disk)",
		"path", a.cfg.StatePath(), "why", r.Why, "kept", r.Kept)
	return st
}

// saveState writes state.json (and the kept file) atomically with mode 0600, through
// the redactor.
func (a *Agent) saveState(st *State) error {
	return saveStateFile(a.cfg.StatePath(), a.cfg.KeepPath(), a.cfg.EnvID, st, a.red.RedactBytes)
}
