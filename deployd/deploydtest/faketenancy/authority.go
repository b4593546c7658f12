package faketenancy

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"sync"
)

// MemoryAuthority is a minimal Authority for tests that need no OpenBao: it issues
// tokens on demand and mints JWT-shaped grants (unsigned: nothing verifies them). The
// zero value is not usable; call NewMemoryAuthority.
type MemoryAuthority struct {
	mu     sync.Mutex
	tokens map[string]string
	grants map[string]string // env → its one live grant
}

var _ Authority = (*MemoryAuthority)(nil)

// NewMemoryAuthority returns an empty MemoryAuthority.
func NewMemoryAuthority() *MemoryAuthority {
	return &MemoryAuthority{tokens: map[string]string{}, grants: map[string]string{}}
}

// Token issues a new live token of envID.
func (a *MemoryAuthority) Token(envID string) string {
	tok := "hvs.fake" + randomHex(16)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens[tok] = envID
	return tok
}

// Revoke ends a token.
func (a *MemoryAuthority) Revoke(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.tokens, token)
}

// TokenEnv returns the environment of a live token.
func (a *MemoryAuthority) TokenEnv(token string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	env, ok := a.tokens[token]
	return env, ok
}

// MintGrant returns a new JWT-shaped grant for envID and supersedes the earlier one.
func (a *MemoryAuthority) MintGrant(envID string) string {
	g := fakeJWT(map[string]any{"sub": envID, "env_id": envID, "jti": randomHex(8)})
	a.mu.Lock()
	defer a.mu.Unlock()
	a.grants[envID] = g
	return g
}

// LiveGrant returns the envID's newest grant, "" if none.
func (a *MemoryAuthority) LiveGrant(envID string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.grants[envID]
}

func fakeJWT(claims map[string]any) string {
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(hdr) + "." + enc.EncodeToString(body) + "." + enc.EncodeToString([]byte(randomHex(32)))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
