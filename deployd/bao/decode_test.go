package bao

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/secret/secrettest"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// authFixtures are the login answers of testdata/login: the kind of their refusal (nil:
// accepted), a word of its detail, and the token, registered even when refused.
var authFixtures = []struct {
	file     string
	wantKind error
	detail   string
	token    string
}{
	{"login/ok.json", nil, "", "s.FIXTUREtokenAAAAAAAAAAAA"},
	{"login/wrapped.json", ErrLeaseShape, "wrapped", "s.FIXTUREwrappingBBBBBBBBBB"},
	{"login/approle.json", ErrLeaseShape, "AppRole", "s.FIXTUREapproleCCCCCCCCCCC"},
	{"login/no-token.json", ErrLeaseShape, "no client token", ""},
	{"login/no-auth.json", ErrLeaseShape, "no client token", ""},
	{"login/limited-use.json", ErrLeaseShape, "limited-use", "s.FIXTURElimitedDDDDDDDDDDD"},
	{"login/batch.json", ErrLeaseShape, "batch", "b.FIXTUREbatchEEEEEEEEEEEEE"},
	{"login/html.json", ErrLeaseShape, "undecodable", ""},
}

func TestDecodeAuthFixtures(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, tc := range authFixtures {
		t.Run(tc.file, func(t *testing.T) {
			body := readFixture(t, tc.file)
			reg := &secrettest.Recorder{}
			info, e := decodeAuth(body, reg, now)
			if tc.token != "" {
				assert.True(t, reg.Has(tc.token), "token registered the moment it is decoded")
			}
			if tc.wantKind == nil {
				require.Nil(t, e)
				assert.Equal(t, tc.token, info.Token.Reveal())
				assert.Equal(t, "acc-fixture-1", info.Accessor)
				assert.Equal(t, time.Hour, info.TTL)
				assert.Equal(t, time.Hour, info.CreationTTL)
				assert.Equal(t, now.Add(time.Hour), info.ExpireTime)
				assert.True(t, info.Renewable)
				assert.Equal(t, []string{"default", "see-env"}, info.Policies)
				assert.Equal(t, "env-dev-01", info.EnvID)
				return
			}
			require.NotNil(t, e)
			assert.ErrorIs(t, e, tc.wantKind)
			assert.Equal(t, codes.LeaseShape, e.Code())
			assert.Contains(t, e.Error(), tc.detail)
			if tc.token != "" {
				assert.NotContains(t, e.Error(), tc.token)
			}
		})
	}
}

// kvFixtures are the KV v2 answers of testdata/kv and why each has no data ("": it has).
var kvFixtures = map[string]string{
	"kv/ok.json":        "",
	"kv/deleted.json":   "version 3 of the secret was deleted",
	"kv/destroyed.json": "version 4 of the secret was destroyed",
	"kv/missing.json":   "the secret does not exist",
}

func TestDecodeKVFixtures(t *testing.T) {
	for file, absent := range kvFixtures {
		d, err := decodeKV(readFixture(t, file))
		require.NoError(t, err, file)
		assert.Equal(t, absent, d.absent, file)
		if absent == "" {
			require.NotNil(t, d.data, file)
		}
	}
	t.Run("values", func(t *testing.T) {
		d, err := decodeKV(readFixture(t, "kv/ok.json"))
		require.NoError(t, err)
		for key, want := range map[string]struct {
			v  string
			ok bool
		}{
			"password": {"pw-fixture", true},
			"port":     {"5432", true},
			"tls":      {"true", true},
			"nested":   {"", false},
			"nothing":  {"", false},
		} {
			v, ok := value(d.data[key])
			assert.Equal(t, want.ok, ok, key)
			assert.Equal(t, want.v, v, key)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		_, err := decodeKV([]byte(`{"data":`))
		require.Error(t, err)
		d, err := decodeKV(nil)
		require.NoError(t, err)
		assert.NotEmpty(t, d.absent)
	})
}

func TestDecodeLookup(t *testing.T) {
	body := `{"data":{"accessor":"acc","ttl":1200,"creation_ttl":3600,"expire_time":"2026-11-30T10:20:00.5Z",
		"renewable":true,"meta":{"env_id":"env-dev-01","role":"see-env"},"policies":["default","see-env"],"num_uses":0,
		"id":"s.THEtokenITSELFxxxxxxxxx"}}`
	tok := secret.New("s.THEtokenITSELFxxxxxxxxx")
	info, e := decodeLookup([]byte(body), tok)
	require.Nil(t, e)
	assert.Equal(t, 20*time.Minute, info.TTL)
	assert.Equal(t, time.Hour, info.CreationTTL)
	assert.Equal(t, time.Date(2026, 11, 30, 10, 20, 0, 5e8, time.UTC), info.ExpireTime)
	assert.Equal(t, "env-dev-01", info.EnvID)
	assert.Equal(t, tok, info.Token)

	for _, bad := range []string{``, `{}`, `{"data":null}`, `{"data":{"ttl":"abc"}}`, `[]`} {
		_, e := decodeLookup([]byte(bad), tok)
		require.NotNil(t, e, bad)
		assert.ErrorIs(t, e, ErrUnavailable)
	}
}

func TestServerDetail(t *testing.T) {
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtb25reSJ9.c2lnbmF0dXJlc2lnbmF0dXJl"
	tests := []struct {
		name    string
		msgs    []string
		secrets []string
		want    string
	}{
		{"plain", []string{"role \"x\" could not be found"}, nil, "role \"x\" could not be found"},
		{"request secret", []string{"bad jwt: abc-SECRET-123"}, []string{"abc-SECRET-123"}, "bad jwt: [REDACTED]"},
		{"jwt shape", []string{"invalid token " + jwt}, nil, "invalid token [REDACTED]"},
		{"token shape", []string{"token s.AAAAAAAAAAAAAAAAAAAAAAAA is bad"}, nil, "token [REDACTED] is bad"},
		{"hvs token", []string{"hvs.CAESIJ0123456789abcdefghij"}, nil, "[REDACTED]"},
		{"multierror", []string{"1 error occurred:\n\t* permission denied\n\n"}, nil, "1 error occurred: * permission denied"},
		{"joined", []string{"a", "b"}, nil, "a; b"},
		{"none", nil, nil, ""},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, serverDetail(tc.msgs, tc.secrets...), tc.name)
	}
	t.Run("cut", func(t *testing.T) {
		long := strings.Repeat("é", 400)
		got := serverDetail([]string{long})
		assert.LessOrEqual(t, len(got), maxDetail+len("…"))
		assert.True(t, strings.HasSuffix(got, "…"))
	})
	t.Run("a secret split by the cut", func(t *testing.T) {
		sec := "zz-" + strings.Repeat("k", 40)
		msg := strings.Repeat("x", maxDetail-10) + " " + sec
		got := serverDetail([]string{msg}, sec)
		assert.NotContains(t, got, sec[:8])
	})
}

// FuzzLoginResponse feeds arbitrary bodies through the login decoder: it must never
// panic, must register any client token it accepted, and its error text must never
// hold the client token of the body.
func FuzzLoginResponse(f *testing.F) {
	for _, tc := range authFixtures {
		f.Add(readFixture(f, tc.file))
	}
	f.Add([]byte(`{"auth":{"client_token":"s.x","num_uses":-1,"lease_duration":-5}}`))
	f.Add([]byte(`{"auth":{"client_token":"s.x","metadata":{"env_id":1}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		reg := &secrettest.Recorder{}
		info, e := decodeAuth(body, reg, time.Unix(0, 0))
		var probe struct {
			Auth *struct {
				ClientToken string `json:"client_token"`
			} `json:"auth"`
		}
		_ = json.Unmarshal(body, &probe)
		if e != nil {
			if !errors.Is(e, ErrLeaseShape) {
				t.Fatalf("unexpected kind %v", e.Kind)
			}
			if probe.Auth != nil && len(probe.Auth.ClientToken) > 3 && strings.Contains(e.Error(), probe.Auth.ClientToken) {
				t.Fatalf("error text holds the token: %q", e.Error())
			}
			return
		}
		if info.Token.IsZero() {
			t.Fatal("accepted a login without a token")
		}
		if !reg.Has(info.Token.Reveal()) {
			t.Fatal("accepted token not registered")
		}
		if info.TTL < 0 {
			t.Fatal("negative TTL")
		}
	})
}

// FuzzKVResponse feeds arbitrary bodies through the KV v2 decoder: it must never
// panic, and data is either present or its absence is explained.
func FuzzKVResponse(f *testing.F) {
	for file := range kvFixtures {
		f.Add(readFixture(f, file))
	}
	f.Add([]byte(`{"data":{"data":{"k":"\u0000"},"metadata":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := decodeKV(body)
		if err != nil {
			return
		}
		if (d.data == nil) == (d.absent == "") {
			t.Fatalf("data %v and absent %q disagree", d.data, d.absent)
		}
		for _, raw := range d.data {
			_, _ = value(raw)
		}
	})
}

// FuzzSecretPath checks that an accepted path always stays below the env root.
func FuzzSecretPath(f *testing.F) {
	for _, p := range []string{"db", "a/b", "../x", "a/../../b", "/abs", "a//b", `a\b`, "a/./b", "%2e%2e/x", "a\x00", " a", "ü/ß"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := SecretPath("secret", "env-dev-01", p)
		if err != nil {
			if !errors.Is(err, ErrSecretPath) {
				t.Fatalf("wrong kind: %v", err)
			}
			return
		}
		const root = "secret/data/envs/env-dev-01/"
		if !strings.HasPrefix(got, root) {
			t.Fatalf("%q not below the root", got)
		}
		if filepath.Clean("/"+got) != "/"+got {
			t.Fatalf("%q is not clean", got)
		}
		if strings.ContainsAny(got, "%?#\\") {
			t.Fatalf("%q holds an escaping character", got)
		}
	})
}

// FuzzLookupResponse feeds arbitrary bodies through the lookup-self decoder: it must
// never panic, never report a negative creation TTL as a renewal need, and keep the
// token it was given.
func FuzzLookupResponse(f *testing.F) {
	f.Add([]byte(`{"data":{"accessor":"a","ttl":1200,"creation_ttl":3600,"expire_time":"2026-11-30T10:20:00Z","renewable":true,"meta":{"env_id":"env-dev-01"},"policies":["default"],"num_uses":0}}`))
	f.Add([]byte(`{"data":{"ttl":-1,"creation_ttl":-5,"expire_time":null,"meta":null}}`))
	f.Add([]byte(`{"data":{"expire_time":"not a time"}}`))
	tok := secret.New("s.fuzzTOKENfuzzTOKENfuzz")
	f.Fuzz(func(t *testing.T, body []byte) {
		info, e := decodeLookup(body, tok)
		if e != nil {
			if !errors.Is(e, ErrUnavailable) {
				t.Fatalf("unexpected kind %v", e.Kind)
			}
			return
		}
		if info.Token != tok {
			t.Fatal("token changed")
		}
		if info.CreationTTL <= 0 && info.NeedsRenew(time.Unix(0, 0)) {
			t.Fatal("renewal asked for a token without creation TTL")
		}
	})
}

// A login answer with AppRole fields spelled in another case is still an AppRole
// answer: the agent must not accept it because of the spelling.
func TestDecodeAuthAppRoleKeysAnyCase(t *testing.T) {
	for _, body := range []string{
		`{"data":{"Role_ID":"x"},"auth":{"client_token":"s.casefixture0123456789","lease_duration":3600,"renewable":true,"token_type":"service"}}`,
		`{"auth":{"client_token":"s.casefixture0123456789","metadata":{"SECRET_ID_ACCESSOR":"x"},"lease_duration":3600,"renewable":true,"token_type":"service"}}`,
	} {
		_, err := decodeAuth([]byte(body), discardRegistry{}, time.Unix(0, 0))
		require.NotNil(t, err, body)
		require.ErrorIs(t, err, ErrLeaseShape)
	}
}

// TestSeconds: OpenBao's TTLs in seconds become Durations within 0 and a century.
func TestSeconds(t *testing.T) {
	for n, want := range map[int64]time.Duration{
		0: 0, -5: 0, 3600: time.Hour, math.MaxInt64: maxTTL, int64(maxTTL/time.Second) + 1: maxTTL,
	} {
		assert.Equal(t, want, seconds(n), n)
	}
}
