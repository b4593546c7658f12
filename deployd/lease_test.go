package deployd_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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
	t.Parallel()
	b := idleBox(t)
	b.Stack.Bao.SetSealed(true)
	b.Publish(faketenancy.SampleApp(b.Env, 1))
	for range 3 {
		out := b.tickEnds(deployd.ExitTemporary, codes.Unavailable)
		assert.False(t, out.Leased)
	}
	assert.Equal(t, 0, b.TenancyCalls("/v1/agent/lease"), "no lease while OpenBao is sealed")
	assert.Empty(t, b.State().Failed, "a sealed OpenBao is not a failure of the sha")

	b.Stack.Bao.SetSealed(false)
	b.tickApplied()
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/lease"))
}

// TestSupersededGrant: a newer lease issued between the lease and the login (a race)
// makes the login fail: UNAUTHENTICATED, exit 1, reported failed, and the box keeps
// serving what it served. It is not a fault of the bundle: the sha is not remembered
// as failed, and the next tick leases again and applies it without a retry from
// tenancy.
func TestSupersededGrant(t *testing.T) {
	t.Parallel()
	b := idleBox(t)
	b.rt.set(func(req *http.Request, resp *http.Response) *http.Response {
		if req.URL.Path == "/v1/agent/lease" {
			b.Stack.Bao.MintGrant(b.Env) // someone else got a newer grant
		}
		return resp
	})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	out := b.tickEnds(deployd.ExitFailed, codes.Unauthenticated)
	assert.True(t, out.Leased)
	assert.Equal(t, "", b.Live(), "nothing served before, nothing served now")
	assert.Equal(t, "failed", b.LastReport().Result)
	assert.NotContains(t, b.State().Failed, sha, "a refused login is not a fault of the bundle")

	b.rt.set(nil)
	out = b.tickApplied()
	assert.True(t, out.Leased, "a new lease, without a retry from tenancy")
	assert.Equal(t, sha, b.Live())
}

// flakyBao answers the first KV read after a login with 503 (OpenBao restarting),
// and passes every other request to OpenBao.
type flakyBao struct {
	base      http.RoundTripper
	mu        sync.Mutex
	loggedIn  bool
	failed    int
	failReads int
	// failLogins is how many logins answer 503 before one goes through; logins
	// counts them all.
	failLogins, logins int
}

func (f *flakyBao) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := f.loggedIn && strings.Contains(req.URL.Path, "/data/envs/") && f.failed < f.failReads
	if fail {
		f.failed++
	}
	if strings.HasSuffix(req.URL.Path, "/login") {
		fail = f.failLogins > f.logins
		f.logins++
		f.loggedIn = !fail
	}
	f.mu.Unlock()
	if fail {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"errors":["Vault is sealed"]}`)), Request: req}, nil
	}
	return f.base.RoundTrip(req)
}

// TestOnePublishOneLease: a tick that failed temporarily after its lease (OpenBao
// unavailable for the secret read that follows the login) leaves the lease recorded;
// the next tick of the same sha goes on under it, with the token the login gave,
// instead of asking again: one publish, one lease. The report ends the record. A
// record whose expiry passed is not used.
func TestOnePublishOneLease(t *testing.T) {
	t.Parallel()
	for _, expired := range []bool{false, true} {
		t.Run(map[bool]string{false: "within the lease", true: "after its expiry"}[expired], func(t *testing.T) {
			b := idleBox(t)
			flaky := &flakyBao{base: http.DefaultTransport, failReads: 1}
			a := b.NewAgent(deployd.Options{BaoHTTP: &http.Client{Transport: flaky}, HealthPoll: 10 * time.Millisecond})
			sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
			out, code := b.Tick(a)
			require.Equal(t, deployd.ExitTemporary, code, "%+v", out)
			assert.True(t, out.Leased)
			rec := b.State().Lease
			require.NotNil(t, rec, "the lease is recorded: sha and expiry, never the grant")
			assert.Equal(t, sha, rec.SHA)
			assert.True(t, rec.ExpiresAt.After(time.Now()))
			data, err := os.ReadFile(b.Cfg.StatePath())
			require.NoError(t, err)
			assert.NotRegexp(t, `eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.`, string(data), "no grant (a JWT) on disk")
			if expired {
				b.editState(func(raw map[string]any) {
					raw["lease"].(map[string]any)["expires_at"] = time.Now().Add(-time.Minute).Format(time.RFC3339)
				})
			}

			out, code = b.Tick(a)
			require.Equal(t, deployd.ExitOK, code, "%+v", out)
			assert.Equal(t, "applied", out.Result)
			assert.Equal(t, sha, b.Live())
			if expired {
				assert.True(t, out.Leased, "an expired lease is not used")
				assert.Equal(t, 2, b.Leases())
			} else {
				assert.False(t, out.Leased, "the next tick goes on under the lease")
				assert.Equal(t, 1, b.Leases(), "one publish, one lease")
				assert.Contains(t, b.Logs.String(), "going on under the lease this box took for this sha")
			}
			assert.Nil(t, b.State().Lease, "the report ends the record")
		})
	}
}

// errBody is a response body whose connection broke: the answer is lost in transit.
type errBody struct{}

func (errBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (errBody) Close() error             { return nil }

// TestLeaseAnswerLostInTransit: tenancy granted the lease but its answer never
// reached the box (the connection broke). The box had recorded the request's id
// before sending it, and the next tick asks again under the same id: tenancy answers
// with the same lease, and the publish costs one lease.
func TestLeaseAnswerLostInTransit(t *testing.T) {
	t.Parallel()
	b := idleBox(t)
	lost := 0
	b.rt.set(func(req *http.Request, resp *http.Response) *http.Response {
		if req.URL.Path == "/v1/agent/lease" && lost == 0 {
			lost++
			_ = resp.Body.Close()
			resp.Body = errBody{}
		}
		return resp
	})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.tickEnds(deployd.ExitTemporary, codes.Unavailable)
	rec := b.State().Lease
	require.NotNil(t, rec, "the request is recorded before it is sent")
	assert.Equal(t, sha, rec.SHA)
	assert.Regexp(t, `^[0-9a-f]{32}$`, rec.RequestID)
	assert.True(t, rec.ExpiresAt.IsZero(), "no answer, no expiry")
	assert.Equal(t, 1, b.Leases(), "tenancy granted it")

	b.tickApplied()
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, 2, b.TenancyCalls("/v1/agent/lease"), "asked twice")
	assert.Equal(t, 1, b.Leases(), "one publish, one lease")
	assert.Equal(t, rec.RequestID, b.Stack.Tenancy.Leases(b.Env)[0].RequestID)
	assert.Contains(t, b.Logs.String(), "under the same request id")
	assert.Nil(t, b.State().Lease, "the report ends the record")

	// The next publish asks under a new id.
	b.Publish(faketenancy.SampleApp(b.Env, 2))
	b.tickExits(deployd.ExitOK)
	leases := b.Stack.Tenancy.Leases(b.Env)
	require.Len(t, leases, 2)
	assert.NotEqual(t, leases[0].RequestID, leases[1].RequestID)
}

// A login that fails for a temporary reason is tried again with the same grant within
// the tick: the grant is never on disk, and a lease whose login never came through
// would cost a second one at the next tick. A login that keeps failing ends the tick
// 75 after loginAttempts.
func TestLoginRetriedUnderOneLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failLogins int
		want       int
		logins     int
		waits      []time.Duration
	}{
		{failLogins: 1, want: deployd.ExitOK, logins: 2, waits: []time.Duration{500 * time.Millisecond}},
		{failLogins: 99, want: deployd.ExitTemporary, logins: 4, waits: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}},
	} {
		t.Run(fmt.Sprint(tc.failLogins), func(t *testing.T) {
			t.Parallel()
			b := idleBox(t)
			flaky := &flakyBao{base: http.DefaultTransport, failLogins: tc.failLogins}
			var waits []time.Duration // the pauses between the logins, taken at once
			after := func(d time.Duration) <-chan time.Time { waits = append(waits, d); return time.After(0) }
			a := b.NewAgent(deployd.Options{BaoHTTP: &http.Client{Transport: flaky}, HealthPoll: 10 * time.Millisecond, After: after})
			b.Publish(faketenancy.SampleApp(b.Env, 1))
			out, code := b.Tick(a)
			require.Equal(t, tc.want, code, "%+v", out)
			assert.Equal(t, 1, b.Leases(), "one lease")
			assert.Equal(t, tc.logins, flaky.logins, "logins with the one grant")
			assert.Equal(t, tc.waits, waits, "the pauses between them double from half a second")
			if code == deployd.ExitOK {
				return
			}
			// OpenBao is back: the next tick asks under the same request id, is
			// answered with the same grant, and applies under the one lease.
			flaky.mu.Lock()
			flaky.failLogins = 0
			flaky.mu.Unlock()
			out, code = b.Tick(a)
			require.Equal(t, deployd.ExitOK, code, "%+v", out)
			assert.Equal(t, 2, b.TenancyCalls("/v1/agent/lease"))
			assert.Equal(t, 1, b.Leases(), "one publish, one lease")
		})
	}
}
