package deployd

import (
	"context"
	"fmt"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/release"
)

// takeDown takes the live release down: compose down (with volumes only when tenancy
// asks for a purge and the tier is not prod), current removed, report down. The
// report names the release that was live (its sha and serial), or none. A purge
// also removes every release with its .env (docs/OPERATIONS.md, "Down and purge"); a
// plain down keeps them.
func (t *tick) takeDown(ctx context.Context, inst tenancy.Instruction) error {
	cur := serving(t.st)
	t.out.SHA, t.out.Serial = cur.SHA, cur.Serial
	purge := inst.Purge
	if purge && t.a.cfg.Tier() == "prod" {
		t.log.Warn("tenancy asked for a purge on a prod environment; prod never purges: taking it down without -v, its releases and their .env stay")
		purge = false
	}
	target := cur.SHA
	if target == "" && purge && t.a.store.Has(cur.Previous) {
		// A purge after a plain down: the volumes are still there, and the release
		// that was taken down still has the files and the .env compose needs.
		target = cur.Previous
	}
	if target != "" {
		if err := t.composeDown(ctx, target, purge); err != nil {
			return err
		}
	}
	if purge {
		return t.purge(cur, target != "")
	}
	live, err := t.a.store.Down(cur)
	if err != nil {
		return &Error{Op: "down: remove current", Err: err}
	}
	setServing(t.st, live)
	decided(t.st)
	t.result = tenancy.ResultDown
	return nil
}

// composeDown runs compose down on the release sha, with -v when volumes.
func (t *tick) composeDown(ctx context.Context, sha string, volumes bool) error {
	m, err := t.a.store.Manifest(sha)
	if err != nil {
		return &Error{Op: "down: read the release", Err: err}
	}
	t.a.learnReleaseSecrets(sha, m)
	cc, err := t.a.composeFor(sha, m.ComposeFiles)
	if err == nil {
		var dout compose.Output
		dout, err = cc.Down(ctx, volumes)
		t.tail = dout.String()
	}
	if err != nil {
		return &Error{Op: "compose down", Err: err}
	}
	t.log.Info("took the environment down", "sha", release.Short(sha), "volumes_removed", volumes)
	return nil
}

// purge removes current and every release with its .env, after compose down -v
// (volumes says whether it ran): no secret value is left under deploy_dir. The
// report's detail and the log line say what was removed. A .env that cannot be
// removed is a STATE_UNAVAILABLE failure; its release stays staged whole, and the
// next tick's purge tries again.
func (t *tick) purge(cur release.Live, volumes bool) error {
	live, p, err := t.a.store.Purge(cur)
	setServing(t.st, live)
	what := p.String()
	if volumes {
		what = "compose down -v removed the volumes; " + what
	}
	paths := make([]string, len(p.Releases))
	for i, sha := range p.Releases {
		paths[i] = t.a.store.Dir(sha)
	}
	attrs := []any{"deploy_dir", t.a.cfg.DeployDir, "releases", len(p.Releases), "env_files", p.EnvFiles,
		"leftovers", len(p.Leftovers), "removed", strings.Join(paths, " ")}
	if len(p.Stuck) > 0 {
		attrs = append(attrs, "stuck", strings.Join(p.Stuck, " "))
	}
	if err != nil {
		t.log.Error("purge: could not remove every .env under deploy_dir; the next tick tries again. Fix the file system of deploy_dir (the err names the file)",
			append(attrs, "err", err)...)
		return &Error{Op: "purge", Code: codes.StateUnavailable, Err: fmt.Errorf("%s, but not every .env: %w", what, err)}
	}
	t.note = "purge: " + what
	if len(p.Releases) == 0 && len(p.Leftovers) == 0 && len(p.Stuck) == 0 {
		t.log.Debug("purge: nothing was left to remove under deploy_dir", attrs...)
	} else {
		t.log.Info("purged: removed every release with its .env; no secret value is left under deploy_dir", attrs...)
	}
	t.result = tenancy.ResultDown
	return nil
}
