package deployd

import (
	"errors"
	"fmt"
	"os"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// ReadState reads the state file of cfg without taking the lock and without touching
// the network. A missing file is an empty State. A file that cannot be read is an error
// matching ErrStateUnreadable; a file that reads but does not parse is an error
// matching ErrStateCorrupt; a path that is not a regular file (a fifo, a directory) is
// an error matching fsutil.ErrNotRegular, returned at once.
func ReadState(cfg Config) (State, error) { return readStateFile(cfg.StatePath(), cfg.EnvID) }

// loadState reads state.json. A file that reads but does not parse is moved aside
// (never a crash loop) and the state is rebuilt from what is on disk. A file that
// cannot be read (EACCES, EIO, a mount gone) is left as it is and the tick ends on a
// temporary STATE_UNAVAILABLE: moving it aside would lose the env-mismatch latch and
// the memory of failed shas.
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
		a.log.Error("could not read the state file; leaving it as it is, exiting 75, the next tick tries again. Fix the file system",
			"path", a.cfg.StatePath(), "err", err)
		return State{}, &Error{Op: "read state", Code: codes.StateUnavailable, Err: err}
	}
	aside := fmt.Sprintf("%s.corrupt-%d", a.cfg.StatePath(), a.now().Unix())
	if rerr := os.Rename(a.cfg.StatePath(), aside); rerr != nil {
		a.log.Error("state file unreadable and could not be moved aside; starting from an empty state",
			"path", a.cfg.StatePath(), "err", err, "rename_err", rerr)
	} else {
		a.log.Error("state file was corrupt; moved it aside and rebuilt the state from the live release",
			"path", a.cfg.StatePath(), "moved_to", aside, "err", err)
	}
	return State{Schema: stateSchema, EnvID: a.cfg.EnvID}, nil
}

// saveState writes state.json atomically with mode 0600, through the redactor.
func (a *Agent) saveState(st *State) error {
	return saveStateFile(a.cfg.StatePath(), a.cfg.EnvID, st, a.red.RedactBytes)
}

// ReadToken reads the OpenBao token file of cfg without the network, as the tick
// does: a missing file is the zero Value; a file that holds no possible token is an
// error matching ErrTokenCorrupt; a path that is not a regular file is an error
// matching fsutil.ErrNotRegular. The caller registers the token with its redactor
// before anything that could carry it is printed.
func ReadToken(cfg Config) (secret.Value, error) {
	tok, err := readTokenFile(cfg.TokenPath())
	if err != nil {
		return secret.Value{}, err
	}
	return secret.New(tok), nil
}

// readToken reads the OpenBao token file (ReadToken) and registers the token with the
// agent's redactor.
func (a *Agent) readToken() (secret.Value, error) {
	tok, err := ReadToken(a.cfg)
	if err != nil {
		return secret.Value{}, err
	}
	a.red.Add(tok.Reveal())
	return tok, nil
}

// writeToken stores tok in the token file, atomically with mode 0600.
func (a *Agent) writeToken(tok secret.Value) error {
	if err := fsutil.WriteFileAtomic(a.cfg.TokenPath(), []byte(tok.Reveal()+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file %s: %w", a.cfg.TokenPath(), err)
	}
	return nil
}
