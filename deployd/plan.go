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
const PlanSchema = 1

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
	// Hooks are the hooks of the target release the apply would run, in order
	// (docs/BUNDLE.md, "Hooks"); empty: none.
	Hooks []PlanHook `json:"hooks,omitempty"`
	// Restore says whether a failure after the switch would restore the live
	// release: "safe" or "unsafe" (the target's manifest); "" when there is no
	// target bundle read.
	Restore string `json:"restore,omitempty"`
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

// marks are the first column of a service line of Text, by PlanService.Change.
var marks = map[plan.Change]string{plan.Added: "+", plan.Removed: "-", plan.Recreated: "~", plan.Scaled: "^", plan.Kept: "="}

// Text is the plan for an operator: what tenancy asks, one line per service, a
// summary, the notes and what to do next.
func (p Plan) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for %s: %s\n", p.EnvID, p.headline())
	if len(p.Refusals) > 0 {
		fmt.Fprintf(&b, "REFUSED: an apply would refuse this bundle before the lease and change nothing:\n")
		for _, f := range p.Refusals {
			fmt.Fprintf(&b, "  %s: %s\n", f.Code, f.Detail)
		}
	}
	width := 0
	for _, s := range p.Services {
		width = max(width, len(s.Name))
	}
	for _, s := range p.Services {
		line := fmt.Sprintf("  %s %-*s  %s", marks[plan.Change(s.Change)], width, s.Name, s.Change)
		if len(s.Reasons) > 0 {
			texts := make([]string, len(s.Reasons))
			for i, rs := range s.Reasons {
				texts[i] = rs.Text
			}
			line += ": " + strings.Join(texts, "; ")
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	hooksText(&b, p.Hooks, p.Restore)
	if len(p.Refusals) == 0 {
		s := p.Summary
		fmt.Fprintf(&b, "summary: %d added, %d removed, %d recreated, %d scaled, %d kept\n", s.Added, s.Removed, s.Recreated, s.Scaled, s.Kept)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if p.Next != "" {
		fmt.Fprintf(&b, "next: %s\n", p.Next)
	}
	return b.String()
}

// headline is what tenancy asks and what is live, the rest of Text's first line.
func (p Plan) headline() string {
	live := "nothing is live"
	if p.Live != nil {
		live = "live " + release.Short(p.Live.SHA) + fmt.Sprintf(" (serial %d)", p.Live.Serial)
	}
	switch {
	case p.Action == string(tenancy.ActionDown):
		return "tenancy asks for down; " + live
	case p.Target == nil:
		return "tenancy asks for nothing (" + p.Action + "); " + live
	default:
		return fmt.Sprintf("tenancy asks to apply %s (serial %d); %s", release.Short(p.Target.SHA), p.Target.Serial, live)
	}
}

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
	p := Plan{EnvID: a.cfg.EnvID}
	err := a.plan(ctx, &p)
	p.finish()
	return p, err
}

// plan is Plan under the run lock.
func (a *Agent) plan(ctx context.Context, p *Plan) error {
	st, unlock, err := a.begin()
	if err != nil {
		return err
	}
	defer unlock()
	t := &tick{a: a, st: st, started: a.now(), log: a.log.With("plan", true)}
	err = t.plan(ctx, p)
	if serr := a.saveState(st); serr != nil {
		a.log.Warn("could not save what the plan's check-in learnt; the next tick checks in again", "err", serr)
	}
	return err
}

// plan is the plan after the lock: the check-in, then what tenancy asks compared
// with the live release.
func (t *tick) plan(ctx context.Context, p *Plan) error {
	if t.st.LiveSHA != "" {
		p.Live = &PlanRelease{SHA: t.st.LiveSHA, Serial: t.st.LiveSerial}
	}
	inst, err := t.a.checkin(ctx, t.st)
	if err != nil {
		return err
	}
	live, err := t.planLive(ctx)
	if err != nil {
		return err
	}
	p.Action = string(inst.Action)
	return answerWith(ctx, inst, planning{t: t, p: p, live: live})
}

// planning is a plan's answer: what doing what tenancy asked would change.
type planning struct {
	t    *tick
	p    *Plan
	live *plan.Side
}

func (pl planning) none(context.Context) error {
	pl.p.diff(pl.live, pl.live)
	pl.p.Next = "nothing to do: tenancy publishes nothing new for this box, the live release stays as it is"
	return nil
}

func (pl planning) down(context.Context, tenancy.Instruction) error {
	pl.p.diff(pl.live, nil)
	pl.p.Next = "the next tick takes the environment down (docker compose down) and reports down; change what tenancy publishes to keep it"
	if pl.live == nil {
		pl.p.Next = "nothing is live: the next tick reports down and changes nothing"
	}
	return nil
}

// apply is the plan of an apply: the tick's shortcuts, then its steps before the
// lease (prepare), and the diff.
func (pl planning) apply(ctx context.Context, inst tenancy.Instruction) error {
	t, p, live := pl.t, pl.p, pl.live
	p.Target = &PlanRelease{SHA: inst.SHA, Serial: inst.Serial}
	t.log = t.log.With("sha", release.Short(inst.SHA), "serial", inst.Serial)
	switch kind, f := shortcutOf(t.st, inst, t.a.now()); {
	case kind == shortcutFailed:
		p.diff(live, live)
		p.Notes = append(p.Notes, fmt.Sprintf("this sha failed on this box before (%s): the next tick reports the failure again and changes nothing", f.Code))
		p.Next = "publish a fixed bundle, or have tenancy check in with retry to try this one again"
		return nil
	case kind == shortcutLive, kind == shortcutConverge && live != nil:
		p.diff(live, live)
		p.Next = "nothing to do: the live release is what tenancy publishes"
		if kind == shortcutConverge {
			p.Notes = append(p.Notes, "the live release is not confirmed healthy (or tenancy asks for a retry): the next tick runs docker compose up on it again, which starts what is not running and recreates nothing")
		}
		return nil
	}
	b, err := t.prepare(ctx, inst)
	if err != nil {
		return refusedPlan(p, err)
	}
	defer b.file.close()
	p.Target.Serial = b.res.Manifest.Serial
	if _, err := b.file.Seek(0, 0); err != nil {
		return &Error{Op: "plan: rewind the bundle file", Err: err}
	}
	dir, remove, err := t.a.store.Unpack(ctx, b.file.File, inst.SHA)
	if err != nil {
		return &Error{Op: "plan: unpack the bundle", Err: err}
	}
	defer remove()
	next, err := plan.Load(ctx, plan.Source{SHA: inst.SHA, Serial: b.res.Manifest.Serial, Files: dir,
		Dir: t.a.store.Dir(inst.SHA), Manifest: b.res.Manifest, Project: t.a.cfg.Compose.Project})
	if err != nil {
		return &Error{Op: "plan: load the bundle", Code: codes.ComposeInvalid, Err: err}
	}
	p.diff(live, next)
	p.Hooks, p.Restore = planHooks(b.res.Manifest)
	if note := t.planPulls(ctx, b.res.Images); note != "" {
		p.Notes = append(p.Notes, note)
	}
	p.Next = "the next tick applies this (lease, OpenBao, compose up, health); run `monky-deployd run` to apply it now, or wait for the timer"
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
func refusedPlan(p *Plan, err error) error {
	var re *bundle.RefusedError
	if errors.As(err, &re) {
		p.Refusals = append(p.Refusals, re.Refusals...)
		p.Next = "an apply refuses this bundle before the lease and reports it failed: fix it in the renderer and publish again (verify it offline with `monky-deployd verify`)"
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

// diff sets p's services to what compose would do moving from live to next
// (plan.Diff) and adds its notes. It is the one place a diff becomes a Plan's.
func (p *Plan) diff(live, next *plan.Side) {
	services, notes := plan.Diff(live, next)
	p.Services = make([]PlanService, 0, len(services))
	for _, s := range services {
		ps := PlanService{Name: s.Name, Change: string(s.Change)}
		for _, r := range s.Reasons {
			ps.Reasons = append(ps.Reasons, PlanReason{Kind: string(r.Kind), Names: r.Names, Text: r.Text})
		}
		p.Services = append(p.Services, ps)
	}
	p.Notes = append(p.Notes, notes...)
}

// finish sets Schema, fills Summary and Changes from Services and makes the lists
// non-nil (the JSON has [] rather than null).
func (p *Plan) finish() {
	p.Schema = PlanSchema
	p.Summary = PlanSummary{}
	p.Changes = false
	for _, s := range p.Services {
		switch plan.Change(s.Change) {
		case plan.Added:
			p.Summary.Added++
		case plan.Removed:
			p.Summary.Removed++
		case plan.Recreated:
			p.Summary.Recreated++
		case plan.Scaled:
			p.Summary.Scaled++
		case plan.Kept:
			p.Summary.Kept++
		}
		if s.Change != string(plan.Kept) {
			p.Changes = true
		}
	}
	if p.Services == nil {
		p.Services = []PlanService{}
	}
	if p.Refusals == nil {
		p.Refusals = []bundle.Refusal{}
	}
	if p.Notes == nil {
		p.Notes = []string{}
	}
}
