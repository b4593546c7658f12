package deployd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
)

// Outcome is what one tick did, for the caller's log line and for tests.
type Outcome struct {
	// Action is the check-in's action ("apply", "none", "down"), or "" when the tick
	// stopped before tenancy answered.
	Action string `json:"action,omitempty"`
	// Result is what was reported ("applied", "failed", "down"), or "" when nothing was.
	Result string `json:"result,omitempty"`
	// Code is the stable code of a failure or refusal.
	Code codes.Code `json:"code,omitempty"`
	// Detail names what failed (files, variables, services), never a value.
	Detail string `json:"detail,omitempty"`
	// SHA and Serial identify the bundle the tick worked on; with down, the release
	// taken down ("" and 0 when nothing was live), as the report says.
	SHA    string `json:"sha,omitempty"`
	Serial int64  `json:"serial,omitempty"`
	// Restore is what became of the box after an apply that failed after promote
	// (RestoreHealthy, RestoreUnhealthy, RestoreFailed, RestoreNone); "" otherwise.
	Restore string `json:"restore,omitempty"`
	// Leased is true when the tick took a deploy lease.
	Leased bool `json:"leased"`
	// NextCheckin is the interval tenancy asked for.
	NextCheckin time.Duration `json:"next_checkin_ns,omitempty"`
	// Duration is how long the tick took.
	Duration time.Duration `json:"duration_ns"`
}

// tick is one run of the agent's job: the state it works on, what it has done so far
// and what it found. Its steps return errors; end turns an error into what it means.
type tick struct {
	a       *Agent
	st      *State
	out     Outcome
	started time.Time
	log     *slog.Logger
	// down is true for a tick whose check-in asked for down.
	down bool
	// baoDown is set by the token upkeep when OpenBao was unreachable or sealed, so
	// that an apply asks again before it spends a lease.
	baoDown bool
	// promoted is true once the tick's release is live: a failure restores.
	promoted bool
	// tail is what compose printed (and the health evidence), for a failure's report.
	tail string
	// evidence is what the failing services said when the health wait failed (their
	// last healthchecks and log lines), redacted and bounded: kept with the failure
	// in the state, for status.
	evidence string
	// note is the detail of a report that needs no cause (what the image hygiene of
	// an applied release removed).
	note string
	// result is what a step that succeeded has to report (applied, down), with the
	// services it saw; "" when there is nothing to report.
	result   tenancy.Result
	services []tenancy.ServiceState
}

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
	return answerWith(ctx, inst, doing{t})
}

// answer is what a run does with tenancy's instruction: a tick does it (doing), a plan
// says what doing it would change (planning).
type answer interface {
	none(ctx context.Context) error
	down(ctx context.Context, inst tenancy.Instruction) error
	apply(ctx context.Context, inst tenancy.Instruction) error
}

// answerWith is the one switch on the check-in's action, for a tick and a plan alike.
func answerWith(ctx context.Context, inst tenancy.Instruction, ans answer) error {
	switch inst.Action {
	case tenancy.ActionDown:
		return ans.down(ctx, inst)
	case tenancy.ActionApply:
		return ans.apply(ctx, inst)
	}
	return ans.none(ctx) // ActionNone: the client accepts no other action
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

// hold remembers that the tick's sha failed with err, held against a new lease for
// hold (holdUntilRetry: until tenancy asks with retry), with the health evidence the
// tick gathered.
func (t *tick) hold(err error, hold time.Duration) {
	now := t.a.now()
	f := Failure{Serial: t.out.Serial, Code: CodeOf(err), Detail: boundDetail(t.a.red.Redact(err.Error())), At: now, Evidence: t.evidence}
	if hold > 0 {
		f.Until = now.Add(hold)
	}
	rememberFailure(t.st, t.out.SHA, f)
}

// stopped returns a temporary error when ctx was cancelled (a signal, or the caller
// giving up): nothing is restored, remembered as failed or reported; the release
// stays where it is, and the next tick resumes (a promoted release converges without
// a new lease).
func (t *tick) stopped(ctx context.Context, cause error) error {
	if ctx.Err() == nil {
		return nil
	}
	t.log.Warn("the tick was stopped mid-way; leaving the release where it is, the next tick resumes",
		"sha", release.Short(t.out.SHA), "err", cause)
	return &Error{Op: "tick stopped", Code: codes.Interrupted, Err: errors.Join(ctx.Err(), cause)}
}

// repeatedError is a sha that failed before on this box, told again without a lease.
type repeatedError struct {
	sha string
	f   Failure
}

func (e *repeatedError) Error() string {
	return fmt.Sprintf("apply: sha %s failed before on this box (%s): %s", release.Short(e.sha), e.f.Code, e.f.Detail)
}

// Code is the code of the remembered failure.
func (e *repeatedError) Code() codes.Code { return e.f.Code }
