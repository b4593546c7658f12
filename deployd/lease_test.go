package deployd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestSealedOpenBaoSpendsNoLease: when the token upkeep of the tick already found
// OpenBao sealed, an apply exits 75 before the lease instead of spending one on a
// login that cannot succeed (the budget is 5 an hour; the timer ticks every minute).
func TestSealedOpenBaoSpendsNoLease(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.idleTick()
	b.Stack.Bao.SetSealed(true)
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	for range 3 {
		out, code := b.tick()
		assert.Equal(t, deployd.ExitTemporary, code)
		assert.Equal(t, codes.Unavailable, out.Code)
		assert.False(t, out.Leased)
	}
	assert.Equal(t, 0, b.TenancyCalls("/v1/agent/lease"), "no lease while OpenBao is sealed")
	assert.Empty(t, b.State().Failed, "a sealed OpenBao is not a failure of the sha")

	b.Stack.Bao.SetSealed(false)
	out, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "applied", out.Result)
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"))
}
