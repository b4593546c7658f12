package deployd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/plan"
	"github.com/monky/monky-deployd/internal/release"
)

// PlanSchema is the schema of a Plan's JSON; later versions only add fields.
const PlanSchema = plan.Schema

// Plan is what an apply would change on the box now, as `monky-deployd plan`
// prints it (docs/PLAN.md): tenancy's action at a real check-in, the live release,
// the one tenancy asks for, and every service with what docker compose would do with
// it and why. It names services, files, variables and compose keys, never the value
// of a variable or a secret.
type Plan struct {
	// Schema is PlanSchema.
	Schema int `json:"schema"`
	// EnvID is the box's env_id.
	EnvID string `json:"env_id"`
	// Action is tenancy's action at the plan's check-in (apply, none, down); "" when
	// the plan stopped before tenancy answered.
	Action string `json:"action"`
	// Live is the release the box serves; nil when it serves none.
	Live *PlanRelease `json:"live"`
	// Target is the release tenancy asks for with apply; nil with none and down.
	Target *PlanRelease `json:"target"`
	// Changes is true when the apply (or the down) would change a container: the
	// CLI's exit code 2.
	Changes bool `json:"changes"`
	// Summary counts Services by change.
	Summary PlanSummary `json:"summary"`
	// Services are the services of both releases, sorted by name.
	Services []PlanService `json:"services"`
	// Refusals are why the bundle would be refused (bundle.Verify, the signature);
	// then no service is listed, and nothing would change.
	Refusals []bundle.Refusal `json:"refusals"`
	// Notes are what else the operator should know: networks and volumes that
	// change, a sha that failed before, a live release that never came up healthy.
	Notes []string `json:"notes"`
	// Next says what to do next, in one sentence.
	Next string `json:"next"`
}

// PlanRelease names a release.
type PlanRelease struct {
	// SHA is the bundle sha.
	SHA string `json:"sha"`
	// Serial is the manifest's serial.
	Serial int64 `json:"serial"`
}

// PlanSummary counts the services of a Plan by change.
type PlanSummary struct {
	// Added counts the services of the new release only.
	Added int `json:"added"`
	// Removed counts the services of the live release only.
	Removed int `json:"removed"`
	// Recreated counts the services whose containers compose would replace.
	Recreated int `json:"recreated"`
	// Scaled counts the services whose replicas alone change.
	Scaled int `json:"scaled"`
	// Kept counts the services compose would leave as they are.
	Kept int `json:"kept"`
}

// PlanService is one service and what compose would do with it.
type PlanService struct {
	// Name is the compose service name.
	Name string `json:"name"`
	// Change is one of "added", "removed", "recreated" (compose replaces its
	// containers: its configuration hash changes), "scaled" (only its replicas
	// change) and "kept".
	Change string `json:"change"`
	// Reasons say why it is recreated or scaled (or, for a kept service, a config
	// or secret file that changed without compose recreating it).
	Reasons []PlanReason `json:"reasons,omitempty"`
}

// PlanReason is one reason of a PlanService (docs/PLAN.md, "Reasons").
type PlanReason struct {
	// Kind is one of "image", "environment", "release_dir", "file", "settings",
	// "replicas", "sources".
	Kind string `json:"kind"`
	// Names are what the reason is about: variables (environment), bind sources
	// (release_dir), files (file, sources), compose keys (settings).
	Names []string `json:"names,omitempty"`
	// Text is the reason for an operator, naming the same, never a value.
	Text string `json:"text"`
}

// Text is the plan for an operator: one line per service, a summary, the notes and
// what to do next.
func (p Plan) Text() string { return plan.Text(p.report()) }

// Plan checks in (a real check-in: the heartbeat) and, when tenancy asks for an
// apply, fetches and verifies the bundle as a tick does (signature, download,
// bundle.Verify), then compares it with the live release as docker compose would:
// see Plan. It takes the run lock like a tick, but takes no lease, does not touch
// OpenBao (no token upkeep, no login, no secret), pulls nothing, stages and
// promotes nothing, runs no compose and reports nothing to tenancy; the state keeps
// what the check-in learnt, and no failure is remembered against a sha.
//
// A refused bundle returns the Plan with its Refusals and the refusal's error
// (ExitCode 1); other errors map as a tick's do (ExitCode: 75 for a held lock or an
// unreachable tenancy). With a nil error, Plan.Changes says whether an apply would
// change anything.
func (a *Agent) Plan(ctx context.Context) (Plan, error) {
	r := plan.Report{EnvID: a.cfg.EnvID}
	err := a.plan(ctx, &r)
	r.Finish()
	return planOf(r), err
}

// plan is Plan under the run lock.
func (a *Agent) plan(ctx context.Context, r *plan.Report) error {
	st, unlock, err := a.begin()
	if err != nil {
		return err
	}
	defer unlock()
	t := &tick{a: a, st: st, started: a.now(), log: a.log.With("plan", true)}
	err = t.plan(ctx, r)
	if serr := a.saveState(st); serr != nil {
		a.log.Warn("could not save what the plan's check-in learnt; the next tick checks in again", "err", serr)
	}
	return err
}

// plan is the plan after the lock: the check-in, then what tenancy asks compared
// with the live release.
func (t *tick) plan(ctx context.Context, r *plan.Report) error {
	if t.st.LiveSHA != "" {
		r.Live = &plan.Release{SHA: t.st.LiveSHA, Serial: t.st.LiveSerial}
	}
	inst, err := t.checkin(ctx)
	if err != nil {
		return err
	}
	live, err := t.planLive(ctx)
	if err != nil {
		return err
	}
	r.Action = string(inst.Action)
	switch inst.Action {
	case tenancy.ActionNone:
		r.Services, _ = plan.Diff(live, live)
		r.Next = "nothing to do: tenancy publishes nothing new for this box, the live release stays as it is"
		return nil
	case tenancy.ActionDown:
		r.Services, _ = plan.Diff(live, nil)
		r.Next = "the next tick takes the environment down (docker compose down) and reports down; change what tenancy publishes to keep it"
		if live == nil {
			r.Next = "nothing is live: the next tick reports down and changes nothing"
		}
		return nil
	case tenancy.ActionApply:
		return t.planApply(ctx, inst, live, r)
	default:
		return &Error{Op: "check-in", Code: codes.Unavailable, Err: fmt.Errorf("unknown action %q", inst.Action)}
	}
}

// planApply is the plan of an apply: the tick's shortcuts, then its signature check,
// download and verify, and the diff.
func (t *tick) planApply(ctx context.Context, inst tenancy.Instruction, live *plan.Side, r *plan.Report) error {
	st := t.st
	r.Target = &plan.Release{SHA: inst.SHA, Serial: inst.Serial}
	t.log = t.log.With("sha", release.Short(inst.SHA), "serial", inst.Serial)
	switch kind, f := shortcutOf(st, inst); {
	case kind == shortcutFailed:
		r.Services, _ = plan.Diff(live, live)
		r.Notes = append(r.Notes, fmt.Sprintf("this sha failed on this box before (%s): the next tick reports the failure again and changes nothing", f.Code))
		r.Next = "publish a fixed bundle, or have tenancy check in with retry to try this one again"
		return nil
	case kind == shortcutLive, kind == shortcutConverge && live != nil:
		r.Services, _ = plan.Diff(live, live)
		r.Next = "nothing to do: the live release is what tenancy publishes"
		if kind == shortcutConverge {
			r.Notes = append(r.Notes, "the live release is not confirmed healthy (or tenancy asks for a retry): the next tick runs docker compose up on it again, which starts what is not running and recreates nothing")
		}
		return nil
	}
	signedBy, err := t.checkSignature(ctx, inst)
	if err != nil {
		return refusedPlan(r, err)
	}
	f, err := t.download(ctx, inst.SHA)
	if err != nil {
		return refusedPlan(r, err)
	}
	defer f.close()
	res, err := t.verify(ctx, f.File, inst)
	if err != nil {
		return refusedPlan(r, err)
	}
	if err := t.checkSignedSerial(ctx, inst, res.Manifest, signedBy); err != nil {
		return refusedPlan(r, err)
	}
	r.Target.Serial = res.Manifest.Serial
	if _, err := f.Seek(0, 0); err != nil {
		return &Error{Op: "plan", Code: codes.StateUnavailable, Err: err}
	}
	dir, remove, err := t.a.store.Unpack(ctx, f.File, inst.SHA)
	if err != nil {
		return &Error{Op: "plan: unpack the bundle", Code: CodeOf(err), Err: err}
	}
	defer remove()
	next, err := plan.Load(ctx, plan.Source{SHA: inst.SHA, Serial: res.Manifest.Serial, Files: dir,
		Dir: t.a.store.Dir(inst.SHA), Manifest: res.Manifest, Project: t.a.cfg.Compose.Project})
	if err != nil {
		return &Error{Op: "plan: load the bundle", Code: codes.ComposeInvalid, Err: err}
	}
	var notes []string
	r.Services, notes = plan.Diff(live, next)
	r.Notes = append(r.Notes, notes...)
	if note := t.planPulls(ctx, res.Images); note != "" {
		r.Notes = append(r.Notes, note)
	}
	r.Next = "the next tick applies this (lease, OpenBao, compose up, health); run `monky-deployd run` to apply it now, or wait for the timer"
	return nil
}

// planPulls says which services' images the apply would pull before its lease, the
// box holding none of them, or why it would stop there; it pulls nothing. It names
// services, not the images' references.
func (t *tick) planPulls(ctx context.Context, images []bundle.Image) string {
	cli, err := t.a.dockerCLI()
	if err != nil {
		return ""
	}
	pulls, err := t.toPull(ctx, cli, images)
	if err != nil {
		return fmt.Sprintf("the apply would stop before its lease with %s: an image is not on this box and cannot be pulled (the log names it)", CodeOf(err))
	}
	if len(pulls) == 0 {
		return ""
	}
	services := make([]string, 0, len(pulls))
	for _, im := range pulls {
		services = append(services, im.Service)
	}
	return "the apply pulls the images of " + strings.Join(services, ", ") + " before its lease (this box does not hold them, or their pull_policy is always)"
}

// refusedPlan records a refusal in the plan; other errors pass as they are.
func refusedPlan(r *plan.Report, err error) error {
	var re *bundle.RefusedError
	if errors.As(err, &re) {
		for _, rf := range re.Refusals {
			r.Refusals = append(r.Refusals, plan.Refusal{Code: string(rf.Code), Detail: rf.Detail})
		}
		r.Next = "an apply refuses this bundle before the lease and reports it failed: fix it in the renderer and publish again (verify it offline with `monky-deployd verify`)"
	}
	return err
}

// planLive loads the live release as compose runs it; nil when nothing is live.
func (t *tick) planLive(ctx context.Context) (*plan.Side, error) {
	sha := t.st.LiveSHA
	if sha == "" {
		return nil, nil
	}
	m, err := t.a.store.Manifest(sha)
	if err != nil {
		return nil, &Error{Op: "plan: the live release", Code: codes.StateUnavailable, Err: err}
	}
	side, err := plan.Load(ctx, plan.Source{SHA: sha, Serial: m.Serial, Files: t.a.store.Dir(sha),
		Dir: t.a.store.Dir(sha), Manifest: m, Project: t.a.cfg.Compose.Project, Staged: true})
	if err != nil {
		return nil, &Error{Op: "plan: load the live release", Code: codes.StateUnavailable, Err: err}
	}
	return side, nil
}

// planOf is the public form of a report.
func planOf(r plan.Report) Plan {
	p := Plan{Schema: r.Schema, EnvID: r.EnvID, Action: r.Action, Changes: r.Changes,
		Summary: PlanSummary(r.Summary), Services: []PlanService{}, Refusals: []bundle.Refusal{}, Notes: r.Notes, Next: r.Next}
	if r.Live != nil {
		p.Live = &PlanRelease{SHA: r.Live.SHA, Serial: r.Live.Serial}
	}
	if r.Target != nil {
		p.Target = &PlanRelease{SHA: r.Target.SHA, Serial: r.Target.Serial}
	}
	for _, s := range r.Services {
		ps := PlanService{Name: s.Name, Change: string(s.Change)}
		for _, rs := range s.Reasons {
			ps.Reasons = append(ps.Reasons, PlanReason{Kind: string(rs.Kind), Names: rs.Names, Text: rs.Text})
		}
		p.Services = append(p.Services, ps)
	}
	for _, rf := range r.Refusals {
		p.Refusals = append(p.Refusals, bundle.Refusal{Code: codes.Code(rf.Code), Detail: rf.Detail})
	}
	return p
}

// report is the internal form of p, for the text.
func (p Plan) report() plan.Report {
	r := plan.Report{Schema: p.Schema, EnvID: p.EnvID, Action: p.Action, Changes: p.Changes,
		Summary: plan.Summary(p.Summary), Notes: p.Notes, Next: p.Next}
	if p.Live != nil {
		r.Live = &plan.Release{SHA: p.Live.SHA, Serial: p.Live.Serial}
	}
	if p.Target != nil {
		r.Target = &plan.Release{SHA: p.Target.SHA, Serial: p.Target.Serial}
	}
	for _, s := range p.Services {
		rs := plan.Service{Name: s.Name, Change: plan.Change(s.Change)}
		for _, x := range s.Reasons {
			rs.Reasons = append(rs.Reasons, plan.Reason{Kind: plan.Kind(x.Kind), Names: x.Names, Text: x.Text})
		}
		r.Services = append(r.Services, rs)
	}
	for _, rf := range p.Refusals {
		r.Refusals = append(r.Refusals, plan.Refusal{Code: string(rf.Code), Detail: rf.Detail})
	}
	return r
}
