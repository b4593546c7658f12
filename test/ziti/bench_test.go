package zitimesh

import (
	"os"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/logging"
)

// BenchmarkNoneTick measures an idle tick (check-in answered "none") on one box:
//
//   - process/*: the agent binary as the timer runs it, one process per tick, over the
//     mesh (sdk) and over loopback TCP (system);
//   - agent/*: deployd.Agent in this process. "sdk-new-agent" builds an Agent per tick
//     (a new OpenZiti context: controller login, service lookup, session, dial), which is
//     what each process of the timer pays; "sdk-kept-agent" keeps one Agent across ticks
//     as `run --loop` does (one authenticated context, and the idle TLS connection
//     to tenancy kept for 90s).
//
// Run it with
//
//	ZITI_BIN=$PWD/tools/ziti/bin/ziti go test -run '^$' -bench NoneTick -benchtime 20x ./test/ziti/...
func BenchmarkNoneTick(b *testing.B) {
	zitiBin := zitiBinary(b)
	w := newWorld(b, zitiBin, b.TempDir())
	bx := newBox(b, w)
	sdkCfg := bx.config(b, "sdk.yaml", sdkTenancy(w, w.ids[boxID], tenancyService))
	sysCfg := bx.config(b, "system.yaml", systemTenancy(w))

	require.NoError(b, os.WriteFile(bx.Cfg.BootstrapGrant, []byte(w.bao.MintGrant(envID)+"\n"), 0o600))
	r := bx.run(b, nil, "bootstrap", "--config", sysCfg)
	require.Equal(b, 0, r.Code, "stderr:\n%s", r.Stderr)
	w.ten.SetDesired(envID, faketenancy.Desired{Action: "none"})

	for _, c := range []struct{ name, cfg string }{{"process/sdk", sdkCfg}, {"process/system", sysCfg}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				r := bx.run(b, nil, "run", "--config", c.cfg)
				if r.Code != 0 {
					b.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
				}
			}
		})
	}

	// In this process the SDK's logrus output goes nowhere.
	logging.RouteLogrus(logrus.StandardLogger(), nil)
	agent := func(b *testing.B, path string) *deployd.Agent {
		cfg, err := deployd.LoadConfig(path)
		require.NoError(b, err)
		a, err := deployd.New(b.Context(), cfg, deployd.Options{Hostname: "bench", DockerEnv: []string{"PATH=" + bx.Docker.Dir + ":/usr/bin:/bin", "DOCKER_HOST=" + bx.Docker.DockerHost()}})
		require.NoError(b, err)
		return a
	}
	tick := func(b *testing.B, a *deployd.Agent) {
		if out, err := a.Tick(b.Context()); err != nil || out.Action != "none" {
			b.Fatalf("tick: action %q: %v", out.Action, err)
		}
	}
	b.Run("agent/sdk-new-agent", func(b *testing.B) {
		for b.Loop() {
			a := agent(b, sdkCfg)
			tick(b, a)
			require.NoError(b, a.Close())
		}
	})
	for _, c := range []struct{ name, cfg string }{{"agent/sdk-kept-agent", sdkCfg}, {"agent/system-kept-agent", sysCfg}} {
		b.Run(c.name, func(b *testing.B) {
			a := agent(b, c.cfg)
			defer a.Close()
			tick(b, a) // the first tick authenticates; the loop's later ticks are measured
			for b.Loop() {
				tick(b, a)
			}
		})
	}
}
