package deployd

import (
	"context"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/release"
)

// takeDown takes the live release down: compose down (with volumes only when tenancy
// asks for a purge and the tier is not prod), current removed, report down. The
// report names the release that was live (its sha and serial), or none.
func (t *tick) takeDown(ctx context.Context, inst tenancy.Instruction) error {
	cur := serving(t.st)
	t.out.SHA, t.out.Serial = cur.SHA, cur.Serial
	purge := inst.Purge
	if purge && t.a.cfg.Tier() == "prod" {
		t.log.Warn("tenancy asked for a purge on a prod environment; prod never purges, taking it down without -v")
		purge = false
	}
	if cur.SHA != "" {
		m, err := t.a.store.Manifest(cur.SHA)
		if err != nil {
			return &Error{Op: "down: read the live release", Err: err}
		}
		t.a.learnReleaseSecrets(cur.SHA, m)
		cc, err := t.a.composeFor(cur.SHA, m.ComposeFiles)
		if err == nil {
			var dout compose.Output
			dout, err = cc.Down(ctx, purge)
			t.tail = dout.String()
		}
		if err != nil {
			return &Error{Op: "compose down", Err: err}
		}
		t.log.Info("took the environment down", "sha", release.Short(cur.SHA), "volumes_removed", purge)
	}
	live, err := t.a.store.Down(cur)
	if err != nil {
		return &Error{Op: "down: remove current", Err: err}
	}
	setServing(t.st, live)
	t.result = tenancy.ResultDown
	return nil
}
