package deployd

import (
	"context"
	"errors"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// Tick runs one tick: lock, state, token upkeep, check-in, then apply, nothing or
// down, and the report. The error maps onto the exit code contract with ExitCode.
func (a *Agent) Tick(ctx context.Context) (Outcome, error) {
	start := a.now()
	st, unlock, err := a.begin()
	if err != nil {
		return Outcome{Code: CodeOf(err)}, err
	}
	defer unlock()

	t := &tick{a: a, st: st, started: start, log: a.log}
	err = t.run(ctx)
	out := t.out
	if err != nil && out.Code == "" {
		out.Code = CodeOf(err)
	}
	out.Duration = a.now().Sub(start)
	endRun(st, start, a.now(), out.SHA, err, a.red.Redact)
	if serr := a.saveState(st); serr != nil {
		a.log.Error("could not save the state; state.json keeps what the run before saved (the write is atomic), and the next tick tries again. Fix the state dir (the err names the file)", "err", serr)
		if err == nil {
			err = &Error{Op: "save state", Code: codes.StateUnavailable, Err: serr}
			out.Code = CodeOf(err)
		}
	}
	return out, err
}

// begin is what every run that reads and writes the box does first, a tick or a
// plan: take the run lock (held → LOCKED, temporary), load the state, honour the
// AGENT_ENV_MISMATCH latch (a changed env_id clears it) and repair the live release
// from `current`. The caller saves the state and then calls unlock.
func (a *Agent) begin() (st *State, unlock func(), err error) {
	if err := fsutil.MkdirMode(a.cfg.StateDir, 0o700); err != nil {
		return nil, nil, &Error{Op: "state directory", Code: codes.StateUnavailable, Err: err}
	}
	lock, err := fsutil.TryLock(a.cfg.LockPath())
	if errors.Is(err, fsutil.ErrLocked) {
		a.log.Warn("another monky-deployd run holds the lock; this run exits 75 and the next tick tries again",
			"lock", a.cfg.LockPath())
		return nil, nil, &Error{Op: "run lock", Code: codes.Locked, Err: ErrLocked}
	}
	if err != nil {
		return nil, nil, &Error{Op: "run lock", Code: codes.StateUnavailable, Err: err}
	}
	unlock = func() { _ = lock.Unlock() }
	loaded, err := a.loadState()
	if err != nil {
		unlock()
		return nil, nil, err
	}
	if l := loaded.EnvMismatch; l != nil {
		if l.EnvID == a.cfg.EnvID {
			unlock()
			a.log.Error("AGENT_ENV_MISMATCH latched: tenancy says this box's token belongs to another environment; not contacting the network. Fix env_id in the config or bootstrap with a fresh grant for this env",
				"latched_at", l.At, "message", l.Message)
			return nil, nil, &Error{Op: "env mismatch latch", Code: codes.AgentEnvMismatch, Err: ErrEnvMismatch}
		}
		a.log.Info("env_id changed since the AGENT_ENV_MISMATCH latch; clearing it", "latched_env_id", l.EnvID)
		loaded.EnvMismatch = nil
	}
	setServing(&loaded, a.store.Repair(serving(&loaded)))
	return &loaded, unlock, nil
}

// run is the tick after the lock: token upkeep, the check-in, and what tenancy asked.
func (t *tick) run(ctx context.Context) error {
	down, err := t.a.ensureToken(ctx, t.st)
	t.baoDown = down
	if err != nil {
		return err
	}
	inst, err := t.a.checkin(ctx, t.st)
	if err != nil {
		return err
	}
	t.out.Action = string(inst.Action)
	t.out.NextCheckin = inst.NextCheckin
	t.settleDeferral(inst)
	err = answerWith(ctx, inst, doing{t})
	t.tidyKept() // a kept bundle whose sha is live and healthy is used up
	return err
}

// doing is a tick's answer: it does what tenancy asked and ends with the report.
type doing struct{ t *tick }

func (d doing) none(context.Context) error {
	d.t.log.Debug("check-in: nothing to do", "live_sha", d.t.st.LiveSHA)
	return nil
}

func (d doing) down(ctx context.Context, inst tenancy.Instruction) error {
	d.t.down = true
	return d.t.end(ctx, d.t.takeDown(ctx, inst))
}

func (d doing) apply(ctx context.Context, inst tenancy.Instruction) error {
	return d.t.end(ctx, d.t.apply(ctx, inst))
}

// end finishes an apply or a down, and is the one place that reports: success as
// the step left it (t.result), a failure as dispose decides. A stopped tick is left
// as it is (a stop is a crash, not a failure: the next tick resumes).
func (t *tick) end(ctx context.Context, err error) error {
	if err == nil {
		if t.result == "" {
			return nil
		}
		return t.report(ctx, t.result, nil, t.services)
	}
	if stopped := t.stopped(ctx, err); stopped != nil {
		return stopped
	}
	d := t.dispose(err)
	if d.restore {
		err = t.restore(ctx, err)
		if stopped := t.stopped(ctx, err); stopped != nil {
			return stopped
		}
	}
	if d.hold != 0 {
		t.hold(err, d.hold)
	}
	if !d.report {
		return err
	}
	return t.report(ctx, tenancy.ResultFailed, err, nil)
}
