package deployd

import (
	"context"
	"slices"

	"github.com/monky/monky-deployd/internal/release"
)

// restore puts the previous release back after a failure after promote (or, when
// there is none, takes the failed one down), waits for it to be healthy, and returns
// the cause with what became of the box: the report's detail ends with it
// (docs/OPERATIONS.md, "After a failed apply").
func (t *tick) restore(ctx context.Context, cause error) error {
	var r Restore
	cur := serving(t.st)
	switch why := t.restoreUnsafe(cur); {
	case why != "":
		t.log.Error("apply failed after promote and the release says a restore is unsafe; keeping the failed release as compose left it. A person decides: publish a fixed release, roll back explicitly from the console, or take the env down",
			"failed_sha", release.Short(cur.SHA), "previous_sha", release.Short(cur.Previous), "err", cause)
		r = Restore{Result: RestoreSkipped, SHA: cur.Previous, Detail: why}
	case t.a.store.CanRestore(cur):
		t.log.Warn("apply failed after promote; restoring the previous release", "failed_sha", release.Short(cur.SHA), "restore_sha", release.Short(cur.Previous), "err", cause)
		r = t.restorePrevious(ctx, cur)
	default:
		t.log.Warn("apply failed after promote and there is no previous release; taking the failed release down", "failed_sha", release.Short(cur.SHA), "err", cause)
		r = t.discard(ctx, cur)
	}
	r.At = t.a.now()
	t.st.LastRestore = &r
	t.out.Restore = r.Result
	return &restoredError{cause: cause, r: r}
}

// restorePrevious points current back at the previous release, runs compose up on
// it and waits until it is healthy, bounded by health_timeout.
func (t *tick) restorePrevious(ctx context.Context, cur release.Live) Restore {
	prev := cur.Previous
	r := Restore{SHA: prev, Result: RestoreFailed}
	live, err := t.a.store.Restore(cur)
	if err != nil {
		t.log.Error("could not point current back at the previous release; fix the symlink by hand, then run `docker compose up -d` in it",
			"link", t.a.store.CurrentLink(), "restore_sha", release.Short(prev), "err", err)
		r.Detail = "current could not be pointed back at it"
		return r
	}
	setServing(t.st, live)
	rel, err := t.a.store.Read(ctx, prev, t.a.expect())
	if err != nil {
		t.log.Error("the restored release cannot be read; the box may be degraded", "restore_sha", release.Short(prev), "err", err)
		r.Detail = "its manifest or compose files could not be read"
		return r
	}
	t.a.learnReleaseSecrets(prev, rel.Manifest)
	t.st.LiveServices = slices.Clone(rel.Services)
	cc, err := t.a.composeFor(prev, rel.Manifest.ComposeFiles)
	if err == nil {
		_, err = cc.Up(ctx)
	}
	if err != nil {
		t.log.Error("compose up of the restored release failed; the box may be degraded. Look with `docker compose ps --all` in the current directory",
			"restore_sha", release.Short(prev), "err", err)
		r.Detail = "compose up failed"
		return r
	}
	states, err := cc.WaitHealthy(ctx, t.a.waitOptions(rel.Services))
	if err != nil {
		t.log.Error("restored the previous release, but it is not healthy either; the box is degraded. Look with `docker compose ps --all` and `docker compose logs` in the current directory",
			"restore_sha", release.Short(prev), "err", err)
		r.Result, r.Detail = RestoreUnhealthy, t.a.red.Redact(err.Error())
		return r
	}
	confirmLive(t.st, states)
	t.log.Info("restored the previous release and it is healthy: the box serves what it served before the failed apply", "restore_sha", release.Short(prev))
	r.Result = RestoreHealthy
	return r
}

// discard takes a failed first release down: the box then serves what it served
// before, which was nothing.
func (t *tick) discard(ctx context.Context, cur release.Live) Restore {
	if rel, err := t.a.store.Manifest(cur.SHA); err == nil {
		if cc, cerr := t.a.composeFor(cur.SHA, rel.ComposeFiles); cerr == nil {
			if _, derr := cc.Down(ctx, false); derr != nil {
				t.log.Error("compose down of the failed release failed", "err", derr)
			}
		}
	}
	live, err := t.a.store.Discard(cur)
	if err != nil {
		t.log.Error("could not remove the current symlink", "link", t.a.store.CurrentLink(), "err", err)
	}
	setServing(t.st, live)
	return Restore{Result: RestoreNone}
}

// restoredError is a failure after promote with what became of the box: its text
// ends with the restore's outcome, so that the report's detail says it.
type restoredError struct {
	cause error
	r     Restore
}

func (e *restoredError) Error() string { return e.cause.Error() + "; " + e.r.String() }

func (e *restoredError) Unwrap() error { return e.cause }
