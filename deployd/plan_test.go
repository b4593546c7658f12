package deployd_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/composecheck"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/testbox"
)

func (b *box) plan() (deployd.Plan, error) {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.agent.Plan(ctx)
}

// service finds a service of p by name.
func service(t *testing.T, p deployd.Plan, name string) deployd.PlanService {
	t.Helper()
	for _, s := range p.Services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no service %s in the plan: %+v", name, p.Services)
	return deployd.PlanService{}
}

func kinds(s deployd.PlanService) []string {
	var out []string
	for _, r := range s.Reasons {
		out = append(out, r.Kind)
	}
	return out
}

// assertNoValues fails when the plan's text or JSON carries a value of a var or of a
// secret (the planted one, or the placeholder that stands for it).
func assertNoValues(t *testing.T, p deployd.Plan, values ...string) {
	t.Helper()
	data, err := json.Marshal(p)
	require.NoError(t, err)
	values = append(values, testbox.DefaultSecret, composecheck.SecretPlaceholder)
	for _, v := range values {
		assert.NotContains(t, p.Text(), v, "the text carries a value")
		assert.NotContains(t, string(data), v, "the JSON carries a value")
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	t.Run("nothing live: every service is added, no lease, no report", func(t *testing.T) {
		b := idleBox(t)
		reports := len(b.Stack.Tenancy.Reports(b.Env))
		sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
		p, err := b.plan()
		require.NoError(t, err)
		assert.Equal(t, deployd.PlanSchema, p.Schema)
		assert.Equal(t, "apply", p.Action)
		assert.Nil(t, p.Live)
		require.NotNil(t, p.Target)
		assert.Equal(t, sha, p.Target.SHA)
		assert.True(t, p.Changes)
		assert.Equal(t, deployd.PlanSummary{Added: 2}, p.Summary)
		assert.Equal(t, "added", service(t, p, "web").Change)
		assert.Equal(t, "added", service(t, p, "migrate").Change)
		assert.Equal(t, 0, b.Leases(), "plan takes no lease")
		assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "plan reports nothing")
		assert.Empty(t, b.DockerCalls("compose"), "plan runs no compose")
		assert.Empty(t, pulled(b), "plan pulls nothing")
		assert.Contains(t, p.Notes, "the apply pulls the images of migrate, web before its lease (this box does not hold them, or their pull_policy is always)")
		assert.Empty(t, b.Releases(), "plan stages nothing")
		assert.Equal(t, "", b.Live())
		assertNoValues(t, p, "info")
	})
	t.Run("the live bundle: nothing changes", func(t *testing.T) {
		b := idleBox(t)
		sha := b.apply(faketenancy.SampleApp(b.Env, 1))
		leases := b.Leases()
		p, err := b.plan()
		require.NoError(t, err)
		assert.False(t, p.Changes)
		assert.Equal(t, sha, p.Live.SHA)
		assert.Equal(t, deployd.PlanSummary{Kept: 2}, p.Summary)
		assert.Contains(t, p.Next, "the live release is what tenancy publishes")
		assert.Equal(t, leases, b.Leases())
		assert.Empty(t, p.Notes, "nothing to pull, nothing to note")
	})
	for _, tc := range []struct {
		name, action string
		changes      bool
		summary      deployd.PlanSummary
	}{
		{"none: nothing changes, the live services are kept", "none", false, deployd.PlanSummary{Kept: 2}},
		{"down: every live service is removed", "down", true, deployd.PlanSummary{Removed: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := idleBox(t)
			b.apply(faketenancy.SampleApp(b.Env, 1))
			b.SetDesired(faketenancy.Desired{Action: tc.action})
			p, err := b.plan()
			require.NoError(t, err)
			assert.Equal(t, tc.action, p.Action)
			assert.Equal(t, tc.changes, p.Changes)
			assert.Equal(t, tc.summary, p.Summary)
			assert.NotEmpty(t, b.Live(), "plan takes nothing down")
		})
	}
	t.Run("image change: recreated with the reason", func(t *testing.T) {
		b := idleBox(t)
		b.apply(faketenancy.SampleApp(b.Env, 1))
		spec := faketenancy.SampleApp(b.Env, 2)
		spec.Files["compose.yaml"] = strings.Replace(spec.Files["compose.yaml"], "busybox:1.36", "busybox:1.37", 1)
		spec.Files["config/app.toml"] = faketenancy.SampleApp(b.Env, 1).Files["config/app.toml"]
		b.Publish(spec)
		p, err := b.plan()
		require.NoError(t, err)
		assert.True(t, p.Changes)
		m := service(t, p, "migrate")
		assert.Equal(t, "recreated", m.Change)
		assert.Equal(t, []string{"image"}, kinds(m))
		// web mounts ./config/app.toml: a new release directory, the same file.
		w := service(t, p, "web")
		assert.Equal(t, "recreated", w.Change)
		assert.Equal(t, []string{"release_dir", "file"}, kinds(w))
		assert.Contains(t, w.Reasons[1].Text, "unchanged")
		assert.Contains(t, p.Notes, "the apply pulls the images of migrate before its lease (this box does not hold them, or their pull_policy is always)",
			"the new image only; web's the box holds")
		assertNoValues(t, p, "info")
	})
	t.Run("env var value change: recreated naming the var only", func(t *testing.T) {
		b := idleBox(t)
		b.apply(faketenancy.SampleApp(b.Env, 1))
		spec := faketenancy.SampleApp(b.Env, 2)
		spec.Vars["LOG_LEVEL"] = "debug-value-7731"
		b.Publish(spec)
		p, err := b.plan()
		require.NoError(t, err)
		w := service(t, p, "web")
		assert.Equal(t, "recreated", w.Change)
		require.Contains(t, kinds(w), "environment")
		for _, r := range w.Reasons {
			if r.Kind == "environment" {
				assert.Equal(t, []string{"LOG_LEVEL"}, r.Names)
			}
			if r.Kind == "file" {
				assert.Equal(t, []string{"config/app.toml"}, r.Names, "the file's content changed with the serial")
			}
		}
		assert.Equal(t, "kept", service(t, p, "migrate").Change)
		assertNoValues(t, p, "debug-value-7731", "info")
	})
	t.Run("added and removed services", func(t *testing.T) {
		b := idleBox(t)
		b.apply(faketenancy.SampleApp(b.Env, 1))
		spec := faketenancy.SampleApp(b.Env, 2)
		spec.Files["compose.yaml"] = strings.Replace(spec.Files["compose.yaml"], "  migrate:", "  worker:", 1)
		b.Publish(spec)
		p, err := b.plan()
		require.NoError(t, err)
		assert.Equal(t, "added", service(t, p, "worker").Change)
		assert.Equal(t, "removed", service(t, p, "migrate").Change)
		assert.Equal(t, 1, p.Summary.Added)
		assert.Equal(t, 1, p.Summary.Removed)
	})
	t.Run("refused bundle: exit 1, no lease, no report, not remembered", func(t *testing.T) {
		b := idleBox(t)
		reports := len(b.Stack.Tenancy.Reports(b.Env))
		spec := faketenancy.SampleApp(b.Env, 1)
		spec.Files["compose.yaml"] += "  evil:\n    image: busybox:1.36\n    privileged: true\n"
		sha := b.Publish(spec)
		p, err := b.plan()
		require.Error(t, err)
		assert.Equal(t, deployd.ExitFailed, deployd.ExitCode(err))
		assert.Equal(t, codes.Privileged, deployd.CodeOf(err))
		require.NotEmpty(t, p.Refusals)
		assert.Equal(t, codes.Privileged, p.Refusals[0].Code)
		assert.False(t, p.Changes)
		assert.Empty(t, p.Services)
		assert.Equal(t, 0, b.Leases(), "a refused bundle costs no lease")
		assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "plan reports nothing")
		assert.NotContains(t, b.State().Failed, sha, "plan remembers no failure")
		assert.Contains(t, p.Text(), "REFUSED")
	})
	t.Run("tenancy unreachable is 75", func(t *testing.T) {
		b := idleBox(t)
		b.Stack.Tenancy.Close()
		_, err := b.plan()
		assert.Equal(t, deployd.ExitTemporary, deployd.ExitCode(err))
	})
	t.Run("the run lock held is 75", func(t *testing.T) {
		b := idleBox(t)
		lock, err := fsutil.TryLock(b.Cfg.LockPath())
		require.NoError(t, err)
		defer func() { _ = lock.Unlock() }()
		_, err = b.plan()
		assert.ErrorIs(t, err, deployd.ErrLocked)
		assert.Equal(t, deployd.ExitTemporary, deployd.ExitCode(err))
	})
	t.Run("the check-in is a real one, OpenBao is not asked", func(t *testing.T) {
		b := idleBox(t)
		checkins, bao := b.TenancyCalls("/v1/agent/checkin"), b.BaoCalls("/v1/")
		b.Publish(faketenancy.SampleApp(b.Env, 1))
		_, err := b.plan()
		require.NoError(t, err)
		assert.Equal(t, checkins+1, b.TenancyCalls("/v1/agent/checkin"))
		assert.Equal(t, bao, b.BaoCalls("/v1/"), "plan does not touch OpenBao")
		assert.Equal(t, "apply", b.State().LastAction, "the state keeps what the check-in learnt")
	})
}
