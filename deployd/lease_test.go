package deployd_test

import (
	"net/http"
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

// TestSupersededGrant: a newer lease issued between the lease and the login (a race)
// makes the login fail: UNAUTHENTICATED, exit 1, reported failed, and the box keeps
// serving what it served. It is not a fault of the bundle: the sha is not remembered
// as failed, and the next tick leases again and applies it without a retry from
// tenancy.
func TestSupersededGrant(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.idleTick()
	b.rt.set(func(req *http.Request, resp *http.Response) *http.Response {
		if req.URL.Path == "/v1/agent/lease" {
			b.Stack.Bao.MintGrant(b.Env) // someone else got a newer grant
		}
		return resp
	})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	require.Equal(t, codes.Unauthenticated, out.Code)
	assert.True(t, out.Leased)
	assert.Equal(t, "", b.Live(), "nothing served before, nothing served now")
	assert.Equal(t, "failed", b.LastReport().Result)
	assert.NotContains(t, b.State().Failed, sha, "a refused login is not a fault of the bundle")

	b.rt.set(nil)
	out, code = b.tick()
	assert.Equal(t, deployd.ExitOK, code)
	assert.Equal(t, "applied", out.Result)
	assert.True(t, out.Leased, "a new lease, without a retry from tenancy")
	assert.Equal(t, sha, b.Live())
}
