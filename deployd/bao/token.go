package bao

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/monky/monky-deployd/deployd/secret"
)

// TokenInfo is what OpenBao says about a token.
type TokenInfo struct {
	// Token is the client token. It is the bearer to OpenBao and to monky-tenancy.
	Token secret.Value
	// Accessor is the token's accessor (not a secret: it cannot be used as the token).
	Accessor string
	// TTL is the remaining time to live when OpenBao answered.
	TTL time.Duration
	// CreationTTL is the TTL the token was created with; 0 when the answer does not
	// say (renew-self).
	CreationTTL time.Duration
	// ExpireTime is when the token expires; zero for a token without expiry.
	ExpireTime time.Time
	// Renewable reports whether renew-self can extend the token.
	Renewable bool
	// Policies are the token's policies, e.g. ["default", "see-env"].
	Policies []string
	// EnvID is the env_id of the token's metadata (claim_mappings of the role), "" if
	// the token carries none.
	EnvID string
}

// NeedsRenew reports whether the token should be renewed at now: it is renewable and
// its remaining TTL is below a third of its creation TTL (docs/PROTOCOL.md).
func (t TokenInfo) NeedsRenew(now time.Time) bool {
	if !t.Renewable || t.CreationTTL <= 0 {
		return false
	}
	// The TTL of the lookup is the server's own count, immune to a skewed clock on
	// the box; ExpireTime is only a fallback for a TokenInfo without it.
	remaining := t.TTL
	if remaining <= 0 && !t.ExpireTime.IsZero() {
		remaining = t.ExpireTime.Sub(now)
	}
	return remaining < t.CreationTTL/3
}

// authWire is the "auth" block of a login or renew-self answer: vault/api's
// SecretAuth plus the fields it does not decode.
type authWire struct {
	api.SecretAuth
	NumUses   int    `json:"num_uses"`
	TokenType string `json:"token_type"`
}

// loginWire is a login or renew-self answer.
type loginWire struct {
	Data     map[string]any      `json:"data"`
	WrapInfo *api.SecretWrapInfo `json:"wrap_info"`
	Auth     *authWire           `json:"auth"`
}

// appRoleKeys are the fields that betray an AppRole login (refused loudly: docs/PROTOCOL.md).
var appRoleKeys = []string{"role_id", "secret_id", "role_name", "secret_id_accessor"}

// decodeAuth decodes a login or renew-self body into a TokenInfo, registering every
// token it finds with reg before it checks anything. It refuses the shapes of
// ErrLeaseShape. now stamps ExpireTime.
func decodeAuth(body []byte, reg secret.Registry, now time.Time) (TokenInfo, *Error) {
	var w loginWire
	if err := json.Unmarshal(body, &w); err != nil {
		return TokenInfo{}, &Error{Kind: ErrLeaseShape, Detail: "the response is not an OpenBao auth response (undecodable JSON)"}
	}
	if w.WrapInfo != nil {
		reg.Add(w.WrapInfo.Token)
	}
	if w.Auth != nil {
		reg.Add(w.Auth.ClientToken)
	}
	switch {
	case w.WrapInfo != nil:
		return TokenInfo{}, &Error{Kind: ErrLeaseShape,
			Detail: "the response is wrapped (wrap_info); monky-deployd unwraps nothing"}
	case hasAnyKey(w.Data, appRoleKeys) || (w.Auth != nil && hasAnyKey(stringMap(w.Auth.Metadata), appRoleKeys)):
		return TokenInfo{}, &Error{Kind: ErrLeaseShape,
			Detail: "the response carries AppRole fields (role_id/secret_id/role_name); there is no AppRole path"}
	case w.Auth == nil || w.Auth.ClientToken == "":
		return TokenInfo{}, &Error{Kind: ErrLeaseShape, Detail: "the response carries no client token"}
	case w.Auth.NumUses > 0:
		return TokenInfo{}, &Error{Kind: ErrLeaseShape,
			Detail: "the token is limited-use (num_uses > 0); the agent needs an unlimited service token"}
	case w.Auth.TokenType != "" && w.Auth.TokenType != "service":
		return TokenInfo{}, &Error{Kind: ErrLeaseShape,
			Detail: "the token type is " + quoteShort(w.Auth.TokenType) + ", not service: it cannot be renewed or revoked"}
	case w.Auth.LeaseDuration < 0:
		return TokenInfo{}, &Error{Kind: ErrLeaseShape, Detail: "the token has a negative lease_duration"}
	}
	ttl := seconds(int64(w.Auth.LeaseDuration))
	info := TokenInfo{
		Token:       secret.New(w.Auth.ClientToken),
		Accessor:    w.Auth.Accessor,
		TTL:         ttl,
		CreationTTL: ttl,
		Renewable:   w.Auth.Renewable,
		Policies:    slices.Clone(w.Auth.Policies),
		EnvID:       w.Auth.Metadata["env_id"],
	}
	if ttl > 0 {
		info.ExpireTime = now.Add(ttl)
	}
	return info, nil
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// hasAnyKey reports whether m has one of keys under Unicode case folding (as
// encoding/json matches fields), so that a spelling such as "Role_ID" is no way around
// the refusal.
func hasAnyKey(m map[string]any, keys []string) bool {
	for mk := range m {
		for _, k := range keys {
			if strings.EqualFold(mk, k) {
				return true
			}
		}
	}
	return false
}

func quoteShort(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return '?'
		}
		return r
	}, s) + `"`
}

// Login logs into OpenBao with a deploy grant (a JWT): POST
// /v1/auth/<auth_mount>/login {"role","jwt"}. The grant and the token are registered
// with Config.Secrets. A rejected grant (wrong role, garbage, expired or superseded)
// is ErrUnauthenticated; a wrapped, AppRole, token-less or limited-use answer is
// ErrLeaseShape.
func (c *Client) Login(ctx context.Context, grant secret.Value) (TokenInfo, error) {
	const op = "login"
	p := "auth/" + c.authMount + "/login"
	c.secrets.Add(grant.Reveal())
	if grant.IsZero() {
		return TokenInfo{}, &Error{Op: op, Kind: ErrUnauthenticated, Path: p,
			Detail: "the grant is empty; bootstrap again with a fresh grant"}
	}
	r, err := c.call(ctx, op, http.MethodPost, p, secret.Value{},
		map[string]string{"role": c.role, "jwt": grant.Reveal()})
	if err != nil {
		return TokenInfo{}, err
	}
	if r.status != http.StatusOK {
		e := statusError(op, p, r, ErrUnauthenticated, grant.Reveal())
		if errors.Is(e.Kind, ErrUnauthenticated) {
			e.Detail = "OpenBao rejected the grant for role " + quoteShort(c.role) + ": " + orDefault(e.Detail, "no reason given")
		}
		return TokenInfo{}, e
	}
	info, e := decodeAuth(r.body, c.secrets, time.Now())
	if e != nil {
		e.Op, e.Path, e.Status = op, p, r.status
		return TokenInfo{}, e
	}
	c.log.DebugContext(ctx, "openbao login", "accessor", info.Accessor, "ttl", info.TTL,
		"renewable", info.Renewable, "env_id", info.EnvID)
	return info, nil
}

// lookupWire is the answer of lookup-self.
type lookupWire struct {
	Data *struct {
		Accessor    string            `json:"accessor"`
		TTL         int64             `json:"ttl"`
		CreationTTL int64             `json:"creation_ttl"`
		ExpireTime  *time.Time        `json:"expire_time"`
		Renewable   bool              `json:"renewable"`
		Meta        map[string]string `json:"meta"`
		Policies    []string          `json:"policies"`
		NumUses     int               `json:"num_uses"`
	} `json:"data"`
}

// maxTTL bounds the TTLs read from OpenBao, so that a number no server sends cannot
// overflow a Duration.
const maxTTL = 100 * 365 * 24 * time.Hour

// seconds is a TTL in seconds as OpenBao writes it, within 0 and maxTTL.
func seconds(n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	if n > int64(maxTTL/time.Second) {
		return maxTTL
	}
	return time.Duration(n) * time.Second
}

// decodeLookup decodes a lookup-self body for token.
func decodeLookup(body []byte, token secret.Value) (TokenInfo, *Error) {
	var w lookupWire
	if err := json.Unmarshal(body, &w); err != nil || w.Data == nil {
		return TokenInfo{}, &Error{Kind: ErrUnavailable, Detail: "malformed lookup-self response"}
	}
	d := w.Data
	info := TokenInfo{
		Token:       token,
		Accessor:    d.Accessor,
		TTL:         seconds(d.TTL),
		CreationTTL: seconds(d.CreationTTL),
		Renewable:   d.Renewable,
		Policies:    slices.Clone(d.Policies),
		EnvID:       d.Meta["env_id"],
	}
	if d.ExpireTime != nil {
		info.ExpireTime = *d.ExpireTime
	}
	return info, nil
}

// tokenRejected is the detail of an invalid token: what the operator does about it.
const tokenRejected = "the OpenBao token is invalid, revoked or expired; bootstrap the box again with a fresh grant"

// LookupSelf asks OpenBao about token (GET /v1/auth/token/lookup-self). An invalid,
// revoked or expired token is ErrUnauthenticated.
func (c *Client) LookupSelf(ctx context.Context, token secret.Value) (TokenInfo, error) {
	const op, p = "lookup-self", "auth/token/lookup-self"
	c.secrets.Add(token.Reveal())
	if token.IsZero() {
		return TokenInfo{}, &Error{Op: op, Kind: ErrUnauthenticated, Path: p, Detail: "no token; " + tokenRejected}
	}
	r, err := c.call(ctx, op, http.MethodGet, p, token, nil)
	if err != nil {
		return TokenInfo{}, err
	}
	if r.status != http.StatusOK {
		e := statusError(op, p, r, ErrUnauthenticated, token.Reveal())
		if errors.Is(e.Kind, ErrUnauthenticated) {
			e.Detail = tokenRejected
		}
		return TokenInfo{}, e
	}
	info, e := decodeLookup(r.body, token)
	if e != nil {
		e.Op, e.Path, e.Status = op, p, r.status
		return TokenInfo{}, e
	}
	return info, nil
}

// RenewSelf renews token (POST /v1/auth/token/renew-self) and returns what the auth
// block of the answer says; CreationTTL is 0 there. A rejected token is
// ErrUnauthenticated.
func (c *Client) RenewSelf(ctx context.Context, token secret.Value) (TokenInfo, error) {
	const op, p = "renew-self", "auth/token/renew-self"
	c.secrets.Add(token.Reveal())
	if token.IsZero() {
		return TokenInfo{}, &Error{Op: op, Kind: ErrUnauthenticated, Path: p, Detail: "no token; " + tokenRejected}
	}
	r, err := c.call(ctx, op, http.MethodPost, p, token, map[string]any{})
	if err != nil {
		return TokenInfo{}, err
	}
	if r.status != http.StatusOK {
		e := statusError(op, p, r, ErrUnauthenticated, token.Reveal())
		if errors.Is(e.Kind, ErrUnauthenticated) {
			e.Detail = "OpenBao refused to renew the token (" + orDefault(e.Detail, "no reason given") + "); " + tokenRejected
		}
		return TokenInfo{}, e
	}
	info, e := decodeAuth(r.body, c.secrets, time.Now())
	if e != nil {
		e.Op, e.Path, e.Status = op, p, r.status
		return TokenInfo{}, e
	}
	info.CreationTTL = 0
	return info, nil
}

// RevokeSelf revokes token (POST /v1/auth/token/revoke-self). A token that OpenBao
// already rejects (403: invalid, expired or revoked) counts as revoked: the call
// returns nil, since what the caller wants — the token unusable — holds.
func (c *Client) RevokeSelf(ctx context.Context, token secret.Value) error {
	const op, p = "revoke-self", "auth/token/revoke-self"
	c.secrets.Add(token.Reveal())
	if token.IsZero() {
		return nil
	}
	r, err := c.call(ctx, op, http.MethodPost, p, token, map[string]any{})
	if err != nil {
		return err
	}
	switch {
	case r.status >= 200 && r.status < 300:
		return nil
	case r.status == http.StatusForbidden:
		c.log.DebugContext(ctx, "openbao revoke-self: token already invalid", "status", r.status)
		return nil
	}
	return statusError(op, p, r, ErrUnauthenticated, token.Reveal())
}
