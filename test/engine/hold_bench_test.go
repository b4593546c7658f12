package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if !engineWanted() {
		b.Skip("needs a docker engine and compose v2: " + enableHint)
	}
	buildAll(b)
	tb := newBox(b, engine, boxOpts{leaseBudget: 1 << 20})
	bare := b.TempDir()
	project := "monky-e2e-bare-" + randomHex(4)
	b.Cleanup(func() { removeProject(b, project) })
	var agent, compose time.Duration
	b.ResetTimer()
	for i := range b.N {
		run := fmt.Sprint(i)
		b.StopTimer()
		removeProject(b, tb.project)
		now := time.Now()
		if err := hold.Write(tb.Cfg.Holds.Dir, hold.Hold{Owner: "bench", UID: os.Getuid(), Reason: "bench", SetAt: now, Until: now.Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		tb.publish(release{compose: benchCompose, vars: map[string]string{"RUN": run}})
		if code := tb.tick(); code != 0 || !strings.Contains(tb.outputs[len(tb.outputs)-1], "apply deferred") {
			b.Fatalf("the deferred tick exited %d: %s", code, tb.outputs[len(tb.outputs)-1])
		}
		b.StartTimer()
		start := time.Now()
		if res := tb.start("hold", "--clear").Wait(b, time.Minute); res.Code != 0 {
			b.Fatalf("hold --clear exited %d: %s", res.Code, res.Output())
		}
		if code := tb.tick(); code != 0 {
			b.Fatalf("the switch exited %d: %s", code, tb.outputs[len(tb.outputs)-1])
		}
		agent += time.Since(start)

		b.StopTimer()
		removeProject(b, project)
		if err := os.WriteFile(filepath.Join(bare, "compose.yaml"), []byte(strings.ReplaceAll(benchCompose, "{{image}}", built.image)), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start = time.Now()
		cmd := exec.Command("docker", "compose", "-p", project, "up", "-d", "--wait")
		cmd.Dir = bare
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "RUN=" + run}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("docker compose up -d --wait: %v: %s", err, out)
		}
		compose += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(agent.Seconds()/float64(b.N), "switch-s/op")
	b.ReportMetric(compose.Seconds()/float64(b.N), "compose-wait-s/op")
	b.ReportMetric(float64(agent)/float64(compose), "ratio")
}
