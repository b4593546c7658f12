package deployd

import (
	"errors"
	"fmt"
	"os"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/state"
)

// State is what the agent remembers between ticks, stored in state.json (mode 0600).
// It never holds a secret value: shas, serials, codes, times and details that name
// files, variables and services only. `monky-deployd status` prints it. It is defined
// in internal/state, which the timer's tick binary links without the rest of the
// agent; its fields and their JSON names are documented there.
type State = state.State

// Failure is the memory of a sha that failed on this box.
type Failure = state.Failure

// Latch records an AGENT_ENV_MISMATCH answer from tenancy.
type Latch = state.Latch

// LiveHealth is the live release's health as a tick last read it from docker: what
// the check-in's live object carries, and what status and the metrics show.
type LiveHealth = state.LiveHealth

// LiveService is one service of LiveHealth: what the check-in carries, and the
// agent's verdict.
type LiveService = state.LiveService

// Restore is what became of the box after an apply failed after promote.
type Restore = state.Restore

// Reclaim is what the image hygiene after an apply removed.
type Reclaim = state.Reclaim

// Results of a Restore: what became of the box after an apply failed after promote.
const (
	// RestoreHealthy: the previous release is live again and every service is ready.
	RestoreHealthy = state.RestoreHealthy
	// RestoreUnhealthy: the previous release is live again but did not become healthy
	// within health_timeout; the box is degraded.
	RestoreUnhealthy = state.RestoreUnhealthy
	// RestoreFailed: the previous release could not be brought back; the box is
	// degraded.
	RestoreFailed = state.RestoreFailed
	// RestoreNone: there was no previous release; the failed one was taken down.
	RestoreNone = state.RestoreNone
)

// ReadState reads the state file of cfg without taking the lock and without touching
// the network. A missing file is an empty State. A file that cannot be read is an error
// matching ErrStateUnreadable; a file that reads but does not parse is an error
// matching ErrStateCorrupt.
func ReadState(cfg Config) (State, error) { return state.Read(cfg.StatePath(), cfg.EnvID) }

// loadState reads state.json. A file that reads but does not parse is moved aside
// (never a crash loop) and the state is rebuilt from what is on disk. A file that
// cannot be read (EACCES, EIO, a mount gone) is left as it is and the tick ends on a
// temporary STATE_UNAVAILABLE: moving it aside would lose the env-mismatch latch and
// the memory of failed shas.
func (a *Agent) loadState() (State, error) {
	st, err := ReadState(a.cfg)
	if err == nil {
		if st.Schema == 0 {
			st.Schema = state.Schema
		}
		return st, nil
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
	return State{Schema: state.Schema, EnvID: a.cfg.EnvID}, nil
}

// saveState writes state.json atomically with mode 0600, through the redactor.
func (a *Agent) saveState(st *State) error {
	return state.Save(a.cfg.StatePath(), a.cfg.EnvID, st, a.red.RedactBytes)
}

// readToken reads the OpenBao token file; a missing file is the zero Value.
func (a *Agent) readToken() (secret.Value, error) {
	tok, err := state.ReadToken(a.cfg.TokenPath())
	if err != nil {
		return secret.Value{}, err
	}
	a.red.Add(tok)
	return secret.New(tok), nil
}

// writeToken stores tok in the token file, atomically with mode 0600.
func (a *Agent) writeToken(tok secret.Value) error {
	if err := fsutil.WriteFileAtomic(a.cfg.TokenPath(), []byte(tok.Reveal()+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file %s: %w", a.cfg.TokenPath(), err)
	}
	return nil
}
