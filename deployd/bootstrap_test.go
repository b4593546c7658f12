package deployd_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
)

// handGrant is a JWT-shaped grant with claims, signed by nobody: the agent reads its
// claims without verifying them (OpenBao does), so it is enough to see what the agent
// refuses before a login.
func handGrant(t *testing.T, claims map[string]any) string {
	t.Helper()
	body, err := json.Marshal(claims)
	require.NoError(t, err)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(body) + "." + enc.EncodeToString([]byte("not-a-signature-0123456789"))
}

// placeGrant writes grant to the box's grant file and returns its content.
func placeGrant(t *testing.T, b *box, grant string) []byte {
	t.Helper()
	data := []byte(grant + "\n")
	require.NoError(t, os.WriteFile(b.Cfg.BootstrapGrant, data, 0o600))
	return data
}

// assertGrantKept fails unless the grant file still holds want.
func assertGrantKept(t *testing.T, b *box, want []byte) {
	t.Helper()
	got, err := os.ReadFile(b.Cfg.BootstrapGrant)
	require.NoError(t, err, "the grant is kept")
	assert.Equal(t, string(want), string(got), "the grant is kept as it was")
}

// TestBootstrapChecksTheGrant: a grant of another env, an expired one, one that is
// not a JWT or has no env_id is refused before any login, UNAUTHENTICATED, naming what
// is wrong, and kept; so is one OpenBao refuses. Nothing is latched.
func TestBootstrapChecksTheGrant(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for name, tc := range map[string]struct {
		grant func(b *box) string
		is    error
		msg   string
		login int
	}{
		"another env": {
			grant: func(b *box) string { return b.Stack.Bao.MintGrant("env-dev-02") },
			is:    deployd.ErrGrantOtherEnv,
			msg:   "is for env env-dev-02, and this box is env-dev-01 (env_id of the config): place a grant of env-dev-01 there, or fix env_id",
		},
		"another env, named safely": {
			grant: func(*box) string {
				return handGrant(t, map[string]any{"env_id": "env-\x1b[31mred\n" + strings.Repeat("word ", 20)})
			},
			is:  deployd.ErrGrantOtherEnv,
			msg: "is for env env- [31mred" + strings.Repeat(" word", 10) + " w…, and this box is env-dev-01",
		},
		"expired": {
			grant: func(*box) string {
				return handGrant(t, map[string]any{"env_id": "env-dev-01", "exp": now.Add(-time.Hour).Unix()})
			},
			is:  deployd.ErrGrantExpired,
			msg: "expired at " + time.Unix(now.Add(-time.Hour).Unix(), 0).UTC().Format(time.RFC3339),
		},
		"not a JWT": {
			grant: func(*box) string { return "hello-this-is-no-grant" },
			is:    deployd.ErrGrantMalformed,
			msg:   "is not a JWT",
		},
		"claims not JSON": {
			grant: func(*box) string { return "eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2ln" },
			is:    deployd.ErrGrantMalformed,
			msg:   "claims are not JSON",
		},
		"no env_id": {
			grant: func(*box) string { return handGrant(t, map[string]any{"sub": "monky-agent:env-dev-01"}) },
			is:    deployd.ErrGrantMalformed,
			msg:   "has no env_id claim",
		},
		"refused by OpenBao": {
			// Within the clock tolerance: the agent lets OpenBao judge it.
			grant: func(*box) string {
				return handGrant(t, map[string]any{"env_id": "env-dev-01", "exp": now.Add(-10 * time.Second).Unix()})
			},
			msg:   "OpenBao refused the bootstrap grant",
			login: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBox(t, boxOptions{noGrant: true})
			want := placeGrant(t, b, tc.grant(b))
			_, err := b.agent.Bootstrap(t.Context(), "")
			require.Error(t, err)
			assert.Equal(t, codes.Unauthenticated, deployd.CodeOf(err))
			assert.Equal(t, deployd.ExitFailed, deployd.ExitCode(err))
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.Contains(t, err.Error(), b.Cfg.BootstrapGrant)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), "the grant was kept")
			assert.Equal(t, tc.login, b.BaoCalls("/login"))
			assertGrantKept(t, b, want)
			assert.Nil(t, b.State().EnvMismatch, "nothing is latched")
			assert.Empty(t, b.Stack.Tenancy.Requests(), "no check-in")
			_, err = os.Stat(b.Cfg.TokenPath())
			assert.ErrorIs(t, err, os.ErrNotExist, "no token stored")
			// The grant is not in the error, the log or the state.
			grant := strings.TrimSpace(string(want))
			assert.NotContains(t, err.Error(), grant)
			assert.NotContains(t, b.Logs.String(), grant)
		})
	}
}

// TestRunChecksTheGrant: a run that bootstraps itself checks the grant the same way:
// a grant of another env is refused and kept, not consumed and then latched.
func TestRunChecksTheGrant(t *testing.T) {
	b := newBox(t, boxOptions{noGrant: true})
	want := placeGrant(t, b, b.Stack.Bao.MintGrant("env-dev-02"))
	for range 2 {
		b.tickEnds(deployd.ExitFailed, codes.Unauthenticated)
	}
	assertGrantKept(t, b, want)
	assert.Zero(t, b.BaoCalls("/login"))
	assert.Empty(t, b.Stack.Tenancy.Requests())
	assert.Nil(t, b.State().EnvMismatch)
}

// TestBootstrapOfABootstrappedBox: a box whose stored token is valid and of its env is
// already bootstrapped: bootstrap says so, succeeds, and leaves the grant and the
// token alone; --force logs in with the grant, consumes it and replaces the token
// (the old one revoked). Without a grant, --force says there is no grant, not that
// there is no token.
func TestBootstrapOfABootstrappedBox(t *testing.T) {
	b := newBox(t, boxOptions{})
	b.idleTick() // bootstraps from the grant
	old, err := os.ReadFile(b.Cfg.TokenPath())
	require.NoError(t, err)
	before := b.State()

	want := placeGrant(t, b, b.PlaceGrant())
	logins, checkins := b.BaoCalls("/login"), b.TenancyCalls("/v1/agent/checkin")
	res, err := b.agent.BootstrapWith(t.Context(), deployd.BootstrapOptions{})
	require.NoError(t, err)
	assert.True(t, res.Already)
	assert.False(t, res.TokenExpires.IsZero())
	assert.Contains(t, b.Logs.String(), "already bootstrapped: the stored OpenBao token is valid")
	assertGrantKept(t, b, want)
	tok, err := os.ReadFile(b.Cfg.TokenPath())
	require.NoError(t, err)
	assert.Equal(t, string(old), string(tok), "the token is left alone")
	assert.Equal(t, logins, b.BaoCalls("/login"), "no login")
	assert.Equal(t, checkins, b.TenancyCalls("/v1/agent/checkin"))
	after := b.State()
	assert.Equal(t, before.LastTick, after.LastTick, "nothing ran: the last run is still the tick's")

	// --force: log in with the grant.
	res, err = b.agent.BootstrapWith(t.Context(), deployd.BootstrapOptions{Force: true})
	require.NoError(t, err)
	assert.False(t, res.Already)
	assert.Equal(t, "none", res.Action, "confirmed by a check-in")
	_, err = os.Stat(b.Cfg.BootstrapGrant)
	assert.ErrorIs(t, err, os.ErrNotExist, "the grant is consumed")
	tok, err = os.ReadFile(b.Cfg.TokenPath())
	require.NoError(t, err)
	assert.NotEqual(t, string(old), string(tok), "a new token")
	_, live := b.Stack.Bao.TokenEnv(strings.TrimSpace(string(old)))
	assert.False(t, live, "the replaced token is revoked")

	// --force without a grant: it names the missing grant and keeps the token.
	_, err = b.agent.BootstrapWith(t.Context(), deployd.BootstrapOptions{Force: true})
	require.Error(t, err)
	assert.ErrorIs(t, err, deployd.ErrNoGrant)
	assert.Equal(t, codes.Unauthenticated, deployd.CodeOf(err))
	assert.Contains(t, err.Error(), "no bootstrap grant at "+b.Cfg.BootstrapGrant)
	assert.NotContains(t, err.Error(), "no token")
	kept, err := os.ReadFile(b.Cfg.TokenPath())
	require.NoError(t, err)
	assert.Equal(t, string(tok), string(kept))

	// Without --force and without a grant: already bootstrapped, exit 0.
	res, err = b.agent.BootstrapWith(t.Context(), deployd.BootstrapOptions{})
	require.NoError(t, err)
	assert.True(t, res.Already)
}

// TestBootstrapOverAnUnusableToken: a token that is invalid (revoked), corrupt, or of
// another env (latched) is no bootstrapped box: bootstrap logs in with the grant
// without --force.
func TestBootstrapOverAnUnusableToken(t *testing.T) {
	t.Parallel()
	for name, spoil := range map[string]func(b *box){
		"revoked": func(b *box) { b.Stack.Bao.InvalidateTokens(b.Env) },
		"corrupt": func(b *box) { require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 32), 0o600)) },
		"another env": func(b *box) {
			tok, err := b.Stack.Login(t.Context(), "env-dev-02")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(tok+"\n"), 0o600))
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := idleBox(t)
			spoil(b)
			b.PlaceGrant()
			res, err := b.agent.BootstrapWith(t.Context(), deployd.BootstrapOptions{})
			require.NoError(t, err)
			assert.False(t, res.Already)
			_, err = os.Stat(b.Cfg.BootstrapGrant)
			assert.ErrorIs(t, err, os.ErrNotExist, "the grant is consumed")
			tok, err := os.ReadFile(b.Cfg.TokenPath())
			require.NoError(t, err)
			env, ok := b.Stack.Bao.TokenEnv(strings.TrimSpace(string(tok)))
			assert.True(t, ok)
			assert.Equal(t, b.Env, env)
		})
	}
}

// TestBootstrapWhileOpenBaoIsDown: when OpenBao cannot say whether the stored token
// is valid, bootstrap consumes nothing and ends on a temporary condition.
func TestBootstrapWhileOpenBaoIsDown(t *testing.T) {
	b := idleBox(t)
	want := placeGrant(t, b, b.PlaceGrant())
	b.Stack.Bao.SetSealed(true)
	_, err := b.agent.BootstrapWith(t.Context(), deployd.BootstrapOptions{})
	require.Error(t, err)
	assert.Equal(t, deployd.ExitTemporary, deployd.ExitCode(err))
	assert.Contains(t, err.Error(), "cannot tell whether the stored OpenBao token is valid")
	assertGrantKept(t, b, want)
}

// TestBootstrapCorruptTokenNoGrant: a corrupt token and no grant: the bootstrap says
// both, not that there is no token. A bootstrap that fails is a run that ends
// non-zero, with its code; without a grant it stores no token.
func TestBootstrapCorruptTokenNoGrant(t *testing.T) {
	b := newBox(t, boxOptions{noGrant: true})
	_, err := b.agent.Bootstrap(t.Context(), "")
	require.Error(t, err)
	st := b.State()
	assert.Equal(t, deployd.ExitFailed, st.LastExit)
	require.NotNil(t, st.LastFailure)
	assert.Equal(t, codes.Unauthenticated, st.LastFailure.Code)
	_, err = os.Stat(b.Cfg.TokenPath())
	assert.ErrorIs(t, err, os.ErrNotExist)

	require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 32), 0o600))
	_, err = b.agent.BootstrapWith(t.Context(), deployd.BootstrapOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, deployd.ErrNoGrant)
	assert.ErrorIs(t, err, deployd.ErrTokenCorrupt)
	assert.Equal(t, codes.Unauthenticated, deployd.CodeOf(err))
	assert.Contains(t, err.Error(), "no bootstrap grant at "+b.Cfg.BootstrapGrant)
	assert.Contains(t, err.Error(), "the OpenBao token file "+b.Cfg.TokenPath()+" is corrupt")
	assert.Empty(t, b.Stack.Bao.Requests())
}

// latchedBox is a box that holds a token of another env and no grant: its first tick
// exits 78 and latches AGENT_ENV_MISMATCH.
func latchedBox(t *testing.T) *box {
	t.Helper()
	b := newBox(t, boxOptions{})
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	tok, err := b.Stack.Login(t.Context(), "env-dev-02")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(tok), 0o600))
	require.NoError(t, os.Remove(b.Cfg.BootstrapGrant))
	b.tickExits(deployd.ExitEnvMismatch)
	require.NotNil(t, b.State().EnvMismatch)
	return b
}

// latchedTick runs a tick of a latched box: it exits 78 without the network.
func (b *box) latchedTick() {
	b.T.Helper()
	before, beforeBao := len(b.Stack.Tenancy.Requests()), len(b.Stack.Bao.Requests())
	b.tickExits(deployd.ExitEnvMismatch)
	assert.Len(b.T, b.Stack.Tenancy.Requests(), before, "a latched run touches no network")
	assert.Len(b.T, b.Stack.Bao.Requests(), beforeBao)
}

// TestFailedBootstrapKeepsTheLatch: only a bootstrap that succeeds clears the
// AGENT_ENV_MISMATCH latch; a bootstrap without a grant leaves later runs at 78
// without the network.
func TestFailedBootstrapKeepsTheLatch(t *testing.T) {
	b := latchedBox(t)

	// No grant: the bootstrap fails, and the latch stays.
	_, err := b.agent.Bootstrap(t.Context(), "")
	require.Error(t, err)
	assert.NotNil(t, b.State().EnvMismatch, "a failed bootstrap must not clear the latch")
	b.latchedTick()
}
