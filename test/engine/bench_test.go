package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchCompose is a 3-service project with healthchecks: what both sides start.
const benchCompose = `services:
  db:
    image: {{image}}
    command: ["serve"]
    environment: {SERVICE: db, RUN: "${RUN}"}
` + healthcheck + `  api:
    image: {{image}}
    command: ["serve"]
    environment: {SERVICE: api, RUN: "${RUN}"}
` + healthcheck + `  web:
    image: {{image}}
    command: ["serve"]
    environment: {SERVICE: web, RUN: "${RUN}"}
` + healthcheck

// BenchmarkApplyVsComposeWait alternates, on the same engine, the agent's apply of a
// 3-service project with healthchecks (a whole `monky-deployd run`: check-in,
// download, verify, lease, login, secrets, stage, promote, compose up, health wait,
// report) with a bare `docker compose up -d --wait` of the same files in a project of
// its own. Both start from no containers. It reports both times and their ratio
// (agent/compose), the figure of docs/BENCHMARKS.md:
//
//	MONKY_ENGINE=1 go test -run '^$' -bench ApplyVsComposeWait -benchtime 10x ./test/engine/
func BenchmarkApplyVsComposeWait(b *testing.B) {
	benchAgainstCompose(b, "agent-s/op", func(tb *box, run string) {
		// The agent: a new release (RUN differs) on a project with no containers.
		tb.publish(release{compose: benchCompose, vars: map[string]string{"RUN": run}})
	}, func(tb *box, _ string) {
		if code := tb.tick(); code != 0 {
			b.Fatalf("the agent's apply exited %d: %s", code, tb.outputs[len(tb.outputs)-1])
		}
	})
}

// benchAgainstCompose alternates b.N times, on the engine (skipped without it), the
// agent's side on a box with a bare `docker compose up -d --wait` of benchCompose in a
// project of its own; both start from no containers. Each round, prepare (untimed)
// and then agent (timed) run with the round's RUN; it reports the agent's seconds per
// op as agentMetric, the bare compose's as compose-wait-s/op, and their ratio
// (agent/compose).
func benchAgainstCompose(b *testing.B, agentMetric string, prepare, agent func(tb *box, run string)) {
	b.Helper()
	if !engineWanted() {
		b.Skip("needs a docker engine and compose v2: " + enableHint)
	}
	buildAll(b)
	tb := newBox(b, engine, boxOpts{leaseBudget: 1 << 20})
	bare := b.TempDir()
	project := "monky-e2e-bare-" + randomHex(4)
	b.Cleanup(func() { removeProject(b, project) })
	var agentTime, compose time.Duration
	b.ResetTimer()
	for i := range b.N {
		run := fmt.Sprint(i)
		b.StopTimer()
		removeProject(b, tb.project)
		prepare(tb, run)
		b.StartTimer()
		start := time.Now()
		agent(tb, run)
		agentTime += time.Since(start)

		// Bare compose: the same files, its own project, no containers.
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
	b.ReportMetric(agentTime.Seconds()/float64(b.N), agentMetric)
	b.ReportMetric(compose.Seconds()/float64(b.N), "compose-wait-s/op")
	b.ReportMetric(float64(agentTime)/float64(compose), "ratio")
}
