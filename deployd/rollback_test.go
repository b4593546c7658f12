package deployd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestExplicitRollbackAfterARollbackRefusal: a sha refused with ROLLBACK (no
// rollback flag) is applied when tenancy then asks for it with rollback: true, the
// remedy docs/OPERATIONS.md names ("roll back explicitly from the console, which sets
// rollback"); the refusal was about the missing flag, not about the sha.
func TestExplicitRollbackAfterARollbackRefusal(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.Publish(faketenancy.SampleApp(b.Env, 5))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	older := b.Publish(faketenancy.SampleApp(b.Env, 3))
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	require.Equal(t, codes.Rollback, out.Code)

	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: older, Rollback: true})
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code, out.Code)
	assert.Equal(t, "applied", out.Result)
	assert.Equal(t, older, b.Live())

	// Without the flag, another refused sha stays remembered (no retry, no download).
	newer := b.Publish(faketenancy.SampleApp(b.Env, 2))
	_, code = b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	downloads := b.TenancyCalls("/v1/agent/bundles/")
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: newer})
	out, code = b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Rollback, out.Code)
	assert.Equal(t, downloads, b.TenancyCalls("/v1/agent/bundles/"), "a remembered failure is re-reported without a download")
}

func TestRestoreDegraded(t *testing.T) {
	for result, want := range map[string]bool{
		deployd.RestoreHealthy: false, deployd.RestoreNone: false,
		deployd.RestoreUnhealthy: true, deployd.RestoreFailed: true,
	} {
		assert.Equal(t, want, deployd.Restore{Result: result}.Degraded(), result)
	}
}
