package deployd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/internal/release"
)

// This file is the release's hooks (docs/BUNDLE.md, "Hooks") and its say on whether
// a failure after the switch restores (docs/OPERATIONS.md, "Hooks and crashes").

// The phases of a hook, as the manifest and the state name them.
const (
	phaseBefore = "before_switch"
	phaseAfter  = "after_switch"
)

// maxHookOutput bounds what the state keeps of one hook run's output (redacted).
const maxHookOutput = 2 << 10

// maxHookRuns bounds how many hook runs the state keeps.
const maxHookRuns = 16

// hookProgress is the state's progress of sha's hooks, a fresh one when it is of
// another sha or a report closed it. A hook of another sha that a crash left running
// (an apply tenancy gave up for a newer sha) has its container removed.
func (t *tick) hookProgress(ctx context.Context, cc *compose.Client, sha string) *HookProgress {
	old := t.st.Hooks
	if old != nil && old.SHA == sha && !old.Closed {
		return old
	}
	if old != nil && old.Running != nil {
		t.log.Warn("a crash interrupted a hook of a release the box no longer applies; removing its container",
			"hook_sha", release.Short(old.SHA), "service", old.Running.Service, "container", old.Running.Container)
		t.removeHookContainer(ctx, cc, old.Running.Container)
	}
	t.st.Hooks = &HookProgress{SHA: sha}
	return t.st.Hooks
}

// closeHooks marks the hooks of sha done with: a report ended its apply.
func closeHooks(st *State, sha string) {
	if p := st.Hooks; p != nil && p.SHA == sha {
		p.Closed = true
	}
}

// hooksBefore runs the release's before-switch hooks from the staged release, after
// the lease and the secrets and before promote: nothing live has changed yet.
func (t *tick) hooksBefore(ctx context.Context, sha string, m bundle.Manifest) error {
	if m.Hooks == nil {
		return nil
	}
	return t.runHooks(ctx, sha, m, phaseBefore, m.Hooks.BeforeSwitch)
}

// hooksAfter runs the release's after-switch hooks once every service is healthy; a
// failure counts as unhealthy.
func (t *tick) hooksAfter(ctx context.Context, sha string, m bundle.Manifest) error {
	if m.Hooks == nil {
		return nil
	}
	return t.runHooks(ctx, sha, m, phaseAfter, m.Hooks.AfterSwitch)
}

func (t *tick) runHooks(ctx context.Context, sha string, m bundle.Manifest, phase string, hooks []bundle.Hook) error {
	if len(hooks) == 0 {
		return nil
	}
	cc, err := t.a.composeFor(sha, m.ComposeFiles)
	if err != nil {
		return &Error{Op: "compose", Err: err}
	}
	p := t.hookProgress(ctx, cc, sha)
	for _, h := range hooks {
		if err := t.runHook(ctx, cc, p, phase, h); err != nil {
			return err
		}
	}
	return nil
}

// runHook runs one hook unless it is done, with the crash record saved before it
// starts. A hook a crash interrupted runs again only when the release marks it
// repeatable.
func (t *tick) runHook(ctx context.Context, cc *compose.Client, p *HookProgress, phase string, h bundle.Hook) error {
	key := phase + "/" + h.Service
	if slices.Contains(p.Done, key) {
		t.log.Info("hook already done in this apply; not running it again", "phase", phase, "service", h.Service)
		return nil
	}
	if r := p.Running; r != nil {
		p.Running = nil
		t.removeHookContainer(ctx, cc, r.Container)
		if r.Phase == phase && r.Service == h.Service && !h.Repeatable {
			t.log.Error("a crash interrupted this hook and the release does not mark it repeatable; not running it again. Check what it did, then retry from the console",
				"code", codes.HookInterrupted, "phase", phase, "service", h.Service, "started", r.Since)
			return &Error{Op: "hook " + h.Service, Code: codes.HookInterrupted, Err: fmt.Errorf("%s hook %s was interrupted by a crash (started %s) and the release does not mark it repeatable: not run again%s",
				phase, h.Service, r.Since.UTC().Format(time.RFC3339), t.nothingSwitched(phase))}
		}
		t.log.Warn("a crash interrupted a hook; running it again, as the release marks it repeatable", "phase", r.Phase, "service", r.Service)
	}
	name := fmt.Sprintf("%s-hook-%s-%d", t.a.cfg.Compose.Project, h.Service, t.a.now().UnixNano())
	p.Running = &RunningHook{Phase: phase, Service: h.Service, Container: name, Since: t.a.now()}
	if err := t.a.saveState(t.st); err != nil {
		p.Running = nil
		return &Error{Op: "save the state before the hook " + h.Service, Err: err}
	}
	t.log.Info("running a hook of the release", "phase", phase, "service", h.Service, "timeout", h.Timeout(), "container", name)
	hctx, cancel := context.WithTimeout(ctx, h.Timeout())
	out, err := cc.RunHook(hctx, bundle.HookProfile, h.Service, name)
	timedOut := hctx.Err() != nil && ctx.Err() == nil
	cancel()
	if ctx.Err() != nil {
		// Stopped: the record stays, so that the next tick knows it was interrupted.
		return &Error{Op: "hook " + h.Service, Err: errors.Join(ctx.Err(), err)}
	}
	p.Running = nil
	if timedOut {
		t.removeHookContainer(ctx, cc, name)
	}
	herr := t.hookVerdict(phase, h, out, err, timedOut)
	t.recordHookRun(p, phase, h, out, herr, timedOut)
	if herr != nil {
		return herr
	}
	p.Done = append(p.Done, key)
	if err := t.a.saveState(t.st); err != nil {
		t.log.Warn("could not save the state after a hook; a crash now would run it again", "service", h.Service, "err", err)
	}
	return nil
}

// hookVerdict is what the end of a hook run means: nil for exit 0; HOOK_LATER for
// exit 75 before the switch; the daemon's code when docker could not be reached;
// HOOK_FAILED otherwise (any other exit, a timeout, a signal).
func (t *tick) hookVerdict(phase string, h bundle.Hook, out compose.Output, err error, timedOut bool) error {
	op := "hook " + h.Service
	fail := func(format string, args ...any) error {
		err := &Error{Op: op, Code: codes.HookFailed, Err: fmt.Errorf(format, args...)}
		t.log.Error("a hook of the release failed; its output goes into the report and `monky-deployd status`. Fix the release (or what the hook checks) and publish again",
			"code", codes.HookFailed, "phase", phase, "service", h.Service, "exit_code", out.ExitCode, "err", err)
		return err
	}
	switch {
	case err == nil:
		t.log.Info("hook succeeded", "phase", phase, "service", h.Service)
		return nil
	case timedOut:
		return fail("%s hook %s did not finish within %s; its container was removed%s", phase, h.Service, h.Timeout(), t.nothingSwitched(phase))
	case errors.Is(err, compose.ErrDockerUnavailable):
		return &Error{Op: op, Err: err}
	case out.ExitCode == compose.ExitLater && phase == phaseBefore:
		t.log.Warn("a hook asked to try again later (exit 75); nothing switched, nothing reported, exiting 75. The next tick runs it again under the same lease",
			"code", codes.HookLater, "service", h.Service)
		return &Error{Op: op, Code: codes.HookLater, Err: fmt.Errorf("%s hook %s asked to try again later (exit 75): nothing was switched", phase, h.Service)}
	case out.ExitCode == compose.ExitLater:
		return fail("%s hook %s exited 75 (later), which only a hook before the switch may ask", phase, h.Service)
	case out.ExitCode > 0:
		return fail("%s hook %s exited %d%s", phase, h.Service, out.ExitCode, t.nothingSwitched(phase))
	}
	return fail("%s hook %s did not exit by itself (%s)%s", phase, h.Service, out.Stop, t.nothingSwitched(phase))
}

// nothingSwitched is what a before-switch hook's failure detail ends with.
func (t *tick) nothingSwitched(phase string) string {
	if phase == phaseBefore {
		return ": nothing was switched, the live release is untouched"
	}
	return ""
}

// recordHookRun keeps the run's redacted, bounded output in the state, and, for a
// failure, in the report's tail and the failure's evidence.
func (t *tick) recordHookRun(p *HookProgress, phase string, h bundle.Hook, out compose.Output, herr error, timedOut bool) {
	output := t.a.red.Redact(out.String())
	run := HookRun{Phase: phase, Service: h.Service, At: t.a.now(), Exit: out.ExitCode, Result: "ok", Output: keepEnd(output, maxHookOutput)}
	switch code := CodeOf(herr); {
	case herr == nil:
	case timedOut:
		run.Result = "timeout"
	case code == codes.HookLater:
		run.Result = "later"
	default:
		run.Result = "failed"
	}
	p.Runs = append(p.Runs, run)
	if len(p.Runs) > maxHookRuns {
		p.Runs = p.Runs[len(p.Runs)-maxHookRuns:]
	}
	if herr != nil {
		head := fmt.Sprintf("%s hook %s (exit %d):\n", phase, h.Service, out.ExitCode)
		t.tail = head + output
		t.evidence = keepEnd(head+output, maxEvidence)
	}
}

// removeHookContainer removes a hook's container that a kill or a crash left
// (docker rm -f), bounded; a failure is logged.
func (t *tick) removeHookContainer(ctx context.Context, cc *compose.Client, name string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveTimeout)
	defer cancel()
	if err := cc.RemoveContainer(rctx, name); err != nil {
		t.log.Warn("could not remove a hook's container; remove it by hand (docker rm -f)", "container", name, "err", err)
	}
}

// decided ends a not-restored failure once the failed release is gone (a down): the
// person decided, and status no longer asks for one.
func decided(st *State) {
	if r := st.LastRestore; r != nil && r.Result == RestoreSkipped {
		st.LastRestore = nil
	}
}

// restoreUnsafe is why the failed release cur may not be restored: its manifest says
// restore: unsafe. "" restores (the default, and a manifest that cannot be read).
func (t *tick) restoreUnsafe(cur release.Live) string {
	m, err := t.a.store.Manifest(cur.SHA)
	if err != nil || !m.RestoreUnsafe() {
		return ""
	}
	return "the release says restoring the previous release is unsafe (restore: unsafe, it changes data forward); the box keeps the failed release as compose left it and a person decides"
}

// PlanHook is a hook an apply would run (Plan.Hooks).
type PlanHook struct {
	// Phase is "before_switch" or "after_switch".
	Phase string `json:"phase"`
	// Service is the compose service run.
	Service string `json:"service"`
	// TimeoutSeconds bounds the run.
	TimeoutSeconds int `json:"timeout_s"`
	// Repeatable says whether a run a crash interrupted is run again.
	Repeatable bool `json:"repeatable"`
}

// planHooks are the hooks of m an apply would run, and whether a failure after its
// switch would be restored (bundle.RestoreSafe or bundle.RestoreUnsafe).
func planHooks(m bundle.Manifest) (hooks []PlanHook, restore string) {
	restore = bundle.RestoreSafe
	if m.RestoreUnsafe() {
		restore = bundle.RestoreUnsafe
	}
	if m.Hooks == nil {
		return nil, restore
	}
	for _, ph := range []struct {
		name  string
		hooks []bundle.Hook
	}{{phaseBefore, m.Hooks.BeforeSwitch}, {phaseAfter, m.Hooks.AfterSwitch}} {
		for _, h := range ph.hooks {
			hooks = append(hooks, PlanHook{Phase: ph.name, Service: h.Service, TimeoutSeconds: int(h.Timeout() / time.Second), Repeatable: h.Repeatable})
		}
	}
	return hooks, restore
}

// hooksText writes a plan's hooks and restore safety for an operator.
func hooksText(b *strings.Builder, hooks []PlanHook, restore string) {
	for _, h := range hooks {
		again := "not run again after a crash (a person decides)"
		if h.Repeatable {
			again = "run again after a crash"
		}
		when := "before the switch, from the staged release; a failure switches nothing"
		if h.Phase == phaseAfter {
			when = "after the switch, once healthy; a failure counts as unhealthy"
		}
		fmt.Fprintf(b, "hook: %s %s (timeout %ds, %s): %s\n", h.Phase, h.Service, h.TimeoutSeconds, again, when)
	}
	switch restore {
	case bundle.RestoreUnsafe:
		fmt.Fprintf(b, "restore: unsafe: a failure after the switch is NOT restored; the failed release stays and a person decides\n")
	case bundle.RestoreSafe:
		fmt.Fprintf(b, "restore: safe: a failure after the switch restores the live release\n")
	}
}
