package fakebao_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/internal/testbox/jsontest"
)

// kinds maps the keys of a JSON object to the JSON kind of each value: "null",
// "object", "array", "string", "number" or "bool".
type kinds map[string]string

func kindsOf(m map[string]any) kinds {
	out := kinds{}
	for k, v := range m {
		out[k] = jsontest.Kind(v)
	}
	return out
}

// The shapes of record, field by field, from OpenBao's own sources:
//
//   - the envelope is sdk/logical HTTPResponse: request_id, lease_id, renewable,
//     lease_duration, data (a map: null when the handler sets none), wrap_info (a
//     pointer: null), warnings (a slice: null when empty), auth (a pointer: null
//     unless the call issues or renews a token). OpenBao has no mount_type.
//   - auth is sdk/logical HTTPAuth: client_token, accessor, policies,
//     token_policies (omitempty), identity_policies (omitempty: absent, the see-env
//     policy is a token policy), metadata, lease_duration, renewable, entity_id,
//     token_type, orphan, mfa_requirement (a pointer, null without MFA: sent on
//     every login and renew) and num_uses.
//   - lookup-self data is vault/token_store.go handleLookup: role, period,
//     bound_cidrs, namespace_path, identity_policies and external_namespace_policies
//     only when set (none for a JWT token in the root namespace); last_renewal_time
//     and last_renewal once the token was renewed.
//   - KV v2 read data is builtin/logical/kv pathDataRead: data and metadata
//     (version, created_time, deletion_time, destroyed, custom_metadata: null
//     unless set); a deleted version answers 404 with the same envelope and data null.
//   - errors are {"errors":[…]} and nothing else; a missing KV path is 404
//     {"errors":[]}; revoke-self is 204 without a body.
var (
	envelopeWithAuth = kinds{"request_id": "string", "lease_id": "string", "renewable": "bool", "lease_duration": "number",
		"data": "null", "wrap_info": "null", "warnings": "null", "auth": "object"}
	envelopeWithData = kinds{"request_id": "string", "lease_id": "string", "renewable": "bool", "lease_duration": "number",
		"data": "object", "wrap_info": "null", "warnings": "null", "auth": "null"}
	authBlock = kinds{"client_token": "string", "accessor": "string", "policies": "array", "token_policies": "array",
		"metadata": "object", "lease_duration": "number", "renewable": "bool", "entity_id": "string",
		"token_type": "string", "orphan": "bool", "mfa_requirement": "null", "num_uses": "number"}
	lookupData = kinds{"accessor": "string", "creation_time": "number", "creation_ttl": "number", "display_name": "string",
		"entity_id": "string", "expire_time": "string", "explicit_max_ttl": "number", "id": "string",
		"issue_time": "string", "meta": "object", "num_uses": "number", "orphan": "bool", "path": "string",
		"policies": "array", "renewable": "bool", "ttl": "number", "type": "string"}
	kvMetadata = kinds{"created_time": "string", "custom_metadata": "null", "deletion_time": "string",
		"destroyed": "bool", "version": "number"}
	errorsOnly = kinds{"errors": "array"}
)

func with(k kinds, extra kinds) kinds {
	out := maps.Clone(k)
	maps.Copy(out, extra)
	return out
}

// call sends one request and returns the status and the raw body.
func call(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("X-Vault-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// TestShapesOfRecord pins, for every call the agent makes, the status and the key set
// and JSON kinds of the envelope, the auth block and the data (and, for KV v2, the
// secret's metadata), so that the fake answers with exactly the fields a real OpenBao
// sends.
func TestShapesOfRecord(t *testing.T) {
	s, clk := newServer(t, fakebao.Options{})
	s.PutSecret("env-dev-01", "db", map[string]string{"password": "x"})
	s.PutSecret("env-dev-01", "gone", map[string]string{"password": "x"})
	s.DeleteSecret("env-dev-01", "gone")
	grant := s.MintGrant("env-dev-01")
	loginURL := s.URL() + "/v1/auth/jwt-tenancy/login"

	status, b := call(t, http.MethodPost, loginURL, "", `{"role":"see-env","jwt":"`+grant+`"}`)
	require.Equal(t, http.StatusOK, status)
	var first map[string]any
	require.NoError(t, json.Unmarshal(b, &first))
	tok := first["auth"].(map[string]any)["client_token"].(string)

	type nested struct {
		key  string // "auth", "data" or "data.metadata"
		want kinds
	}
	tests := []struct {
		name   string
		method string
		path   string
		token  string
		body   string
		before func()
		status int
		top    kinds // nil: no body at all
		nested []nested
	}{
		{name: "login", method: http.MethodPost, path: "/v1/auth/jwt-tenancy/login",
			body:   `{"role":"see-env","jwt":"` + s.MintGrant("env-dev-02") + `"}`,
			status: http.StatusOK, top: envelopeWithAuth, nested: []nested{{"auth", authBlock}}},
		{name: "lookup-self", method: http.MethodGet, path: "/v1/auth/token/lookup-self", token: tok,
			status: http.StatusOK, top: envelopeWithData, nested: []nested{{"data", lookupData}}},
		{name: "renew-self", method: http.MethodPost, path: "/v1/auth/token/renew-self", token: tok,
			before: func() { clk.Advance(time.Minute) },
			status: http.StatusOK, top: envelopeWithAuth, nested: []nested{{"auth", authBlock}}},
		{name: "lookup-self after a renew", method: http.MethodGet, path: "/v1/auth/token/lookup-self", token: tok,
			status: http.StatusOK, top: envelopeWithData,
			nested: []nested{{"data", with(lookupData, kinds{"last_renewal": "string", "last_renewal_time": "number"})}}},
		{name: "kv v2 read", method: http.MethodGet, path: "/v1/secret/data/envs/env-dev-01/db", token: tok,
			status: http.StatusOK, top: envelopeWithData,
			nested: []nested{{"data", kinds{"data": "object", "metadata": "object"}}, {"data.metadata", kvMetadata}}},
		{name: "kv v2 read of a deleted version", method: http.MethodGet, path: "/v1/secret/data/envs/env-dev-01/gone", token: tok,
			status: http.StatusNotFound, top: envelopeWithData,
			nested: []nested{{"data", kinds{"data": "null", "metadata": "object"}}, {"data.metadata", kvMetadata}}},
		{name: "kv v2 read of a missing secret", method: http.MethodGet, path: "/v1/secret/data/envs/env-dev-01/none", token: tok,
			status: http.StatusNotFound, top: errorsOnly},
		{name: "kv v2 read of another env", method: http.MethodGet, path: "/v1/secret/data/envs/env-dev-02/db", token: tok,
			status: http.StatusForbidden, top: errorsOnly},
		{name: "login with a garbage jwt", method: http.MethodPost, path: "/v1/auth/jwt-tenancy/login",
			body: `{"role":"see-env","jwt":"garbage"}`, status: http.StatusBadRequest, top: errorsOnly},
		{name: "lookup-self with an invalid token", method: http.MethodGet, path: "/v1/auth/token/lookup-self", token: "s.invalid",
			status: http.StatusForbidden, top: errorsOnly},
		{name: "revoke-self", method: http.MethodPost, path: "/v1/auth/token/revoke-self", token: tok,
			status: http.StatusNoContent},
		{name: "lookup-self with a revoked token", method: http.MethodGet, path: "/v1/auth/token/lookup-self", token: tok,
			status: http.StatusForbidden, top: errorsOnly},
		{name: "sealed", method: http.MethodGet, path: "/v1/auth/token/lookup-self", token: tok,
			before: func() { s.SetSealed(true) }, status: http.StatusServiceUnavailable, top: errorsOnly},
	}
	for _, tc := range tests {
		// Sequential on purpose: the cases follow one token's life.
		if tc.before != nil {
			tc.before()
		}
		status, b := call(t, tc.method, s.URL()+tc.path, tc.token, tc.body)
		require.Equal(t, tc.status, status, "%s: %s", tc.name, b)
		if tc.top == nil {
			assert.Empty(t, b, "%s: no body", tc.name)
			continue
		}
		var body map[string]any
		require.NoError(t, json.Unmarshal(b, &body), "%s: %s", tc.name, b)
		assert.Equal(t, tc.top, kindsOf(body), "%s: top-level keys and kinds", tc.name)
		for _, n := range tc.nested {
			v := any(body)
			for _, k := range strings.Split(n.key, ".") {
				m, _ := v.(map[string]any)
				v = m[k]
			}
			m, ok := v.(map[string]any)
			require.True(t, ok, "%s: %s is not an object: %s", tc.name, n.key, b)
			assert.Equal(t, n.want, kindsOf(m), "%s: keys and kinds of %s", tc.name, n.key)
		}
	}
}
