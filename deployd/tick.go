package deployd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
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
	// Deferred is why the tick deferred its apply (DeferHold, DeferWindow): prepared,
	// not switched, nothing reported, exit 0; "" when it did not.
	Deferred string `json:"deferred,omitempty"`
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

// disposition is what a failure of an apply or a down means for the box and for
// tenancy.
type disposition struct {
	// report: tenancy hears of it (report failed); otherwise the error only ends the
	// tick.
	report bool
	// hold: how long the sha is held against a new lease (rule.hold); 0: not held.
	hold time.Duration
	// restore: the previous release is put back (the failed one was promoted).
	restore bool
}

// dispose is what a failed step of the tick means: the rule of its code (classify),
// with what the tick knows besides: a failure held before is told again as it was
// (nothing new is held or restored), a down holds no sha, and only a promoted
// release is restored.
func (t *tick) dispose(err error) disposition {
	var again *repeatedError
	switch v := classify(err); {
	case errors.As(err, &again):
		return disposition{report: true}
	case v.rule.fault == faultTemporary, v.rule.fault == faultTenancy:
		return disposition{}
	case v.rule.fault == faultBox, t.down:
		return disposition{report: true, restore: t.promoted}
	default:
		return disposition{report: true, hold: v.rule.hold, restore: t.promoted}
	}
}
