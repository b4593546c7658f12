package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// hookCompose adds the hook services to the sample app's compose file.
const hookCompose = `  backup:
    image: busybox:1.36
    command: ["true"]
    profiles: [monky-hooks]
  smoke:
    image: busybox:1.36
    command: ["true"]
    profiles: [monky-hooks]
`

// hookScript is fastScript with a delay in the hook service's run.
func hookScript(service, delay string) *fakedocker.Script {
	s := fastScript(nil)
	if service != "" {
		s.Hooks = map[string]fakedocker.Hook{service: {Delay: delay}}
	}
	return s
}

// TestCrashInHook kills the binary (SIGKILL) while each hook runs: the next run goes
// on without a second lease, removes the hook's container, and runs the hook again
// only when the release marks it repeatable; otherwise it reports HOOK_INTERRUPTED
// (before the switch nothing switched; after it, the previous release is restored,
// the release saying restore is safe) (docs/OPERATIONS.md, "Hooks and crashes").
func TestCrashInHook(t *testing.T) {
	testprog.SkipIfShort(t)
	for _, tc := range []struct {
		phase      string
		repeatable bool
	}{{"before_switch", true}, {"before_switch", false}, {"after_switch", true}, {"after_switch", false}} {
		t.Run(fmt.Sprintf("%s repeatable=%t", tc.phase, tc.repeatable), func(t *testing.T) {
			b := newBox(t, boxOpts{script: fastScript(nil)})
			oldSHA := b.Publish(faketenancy.SampleApp(b.Env, 1))
			b.tickExit(0)

			service := map[string]string{"before_switch": "backup", "after_switch": "smoke"}[tc.phase]
			bn := faketenancy.SampleApp(b.Env, 2)
			bn.Files["compose.yaml"] += hookCompose
			hook := faketenancy.HookSpec{Service: service, Repeatable: tc.repeatable}
			bn.Hooks = &faketenancy.HooksSpec{}
			if tc.phase == "before_switch" {
				bn.Hooks.BeforeSwitch = []faketenancy.HookSpec{hook}
			} else {
				bn.Hooks.AfterSwitch = []faketenancy.HookSpec{hook}
			}
			newSHA := b.Publish(bn)
			leases := len(b.Stack.Tenancy.Leases(b.Env))

			b.setScript(hookScript(service, "30s"))
			p := b.start([]string{"run", "--config", b.CfgPath})
			testprog.WaitFor(t, 60*time.Second, "the hook's run", func() bool { return len(b.DockerCalls("run")) > 0 })
			killed := p.Kill()
			require.Negative(t, killed.Code, "killed, not exited:\n%s", killed.Stderr)
			st := b.State()
			require.NotNil(t, st.Hooks)
			require.NotNil(t, st.Hooks.Running, "the state records the hook as running")
			assert.Equal(t, service, st.Hooks.Running.Service)

			b.setScript(hookScript("", ""))
			res := b.tick()
			assert.Equal(t, leases+1, len(b.Stack.Tenancy.Leases(b.Env)), "one lease for the killed run and the next one:\n%s", res.Stderr)
			assert.NotContains(t, res.Stderr, "deploy lease granted", "the next run takes no lease")
			rm := b.DockerCalls("rm")
			require.Len(t, rm, 1, "the killed hook's container is removed")
			assert.Contains(t, strings.Join(rm[0].Argv, " "), st.Hooks.Running.Container)
			if tc.repeatable {
				require.Equal(t, 0, res.Code, res.Stderr)
				assert.Equal(t, newSHA, b.Live())
				assert.Equal(t, "applied", b.LastReport().Result)
				assert.Len(t, b.DockerCalls("run"), 2, "the hook ran again")
				return
			}
			require.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
			rep := b.LastReport()
			assert.Equal(t, "HOOK_INTERRUPTED", rep.Code)
			assert.Len(t, b.DockerCalls("run"), 1, "the hook did not run again")
			assert.Equal(t, oldSHA, b.Live(), "nothing switched, or restored")
			if tc.phase == "after_switch" {
				assert.Contains(t, rep.Detail, "restore: restored-healthy")
			}
		})
	}
}
