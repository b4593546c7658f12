package engine

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/monky/monky-deployd/internal/hold"
)

// BenchmarkHoldClearVsComposeWait measures the switch a cleared hold starts (#31): per
// iteration a release is published under a hold and prepared by a deferred tick
// (downloaded, verified, kept, images present), then the timed part runs
// `monky-deployd hold --clear` and the tick that switches (check-in, the kept bundle
// checked, lease, login, secrets, stage, promote, compose up, health wait, report). It
// alternates with a bare `docker compose up -d --wait` of the same files in a project
// of its own; both start from no containers. It reports both times and their ratio
// (goal ≤ 1.2):
//
//	MONKY_ENGINE=1 go test -run '^$' -bench HoldClearVsComposeWait -benchtime 10x ./test/engine/
func BenchmarkHoldClearVsComposeWait(b *testing.B) {
	benchAgainstCompose(b, "switch-s/op", func(tb *box, run string) {
		now := time.Now()
		if err := hold.Write(tb.Cfg.Holds.Dir, hold.Hold{Owner: "bench", UID: os.Getuid(), Reason: "bench", SetAt: now, Until: now.Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		tb.publish(release{compose: benchCompose, vars: map[string]string{"RUN": run}})
		if code := tb.tick(); code != 0 || !strings.Contains(tb.outputs[len(tb.outputs)-1], "apply deferred") {
			b.Fatalf("the deferred tick exited %d: %s", code, tb.outputs[len(tb.outputs)-1])
		}
	}, func(tb *box, _ string) {
		if res := tb.start("hold", "--clear").Wait(b, time.Minute); res.Code != 0 {
			b.Fatalf("hold --clear exited %d: %s", res.Code, res.Output())
		}
		if code := tb.tick(); code != 0 {
			b.Fatalf("the switch exited %d: %s", code, tb.outputs[len(tb.outputs)-1])
		}
	})
}
