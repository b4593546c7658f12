package tenancy

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret/secrettest"
)

var fixedNow = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

var sha64 = strings.Repeat("a", 64)

func TestDecodeInstruction(t *testing.T) {
	tests := []struct {
		file    string
		want    Instruction
		wantErr string // substring naming the field; "" for success
	}{
		{"apply.json", Instruction{Action: ActionApply, SHA: sha64, Serial: 17, Retry: true, NextCheckin: time.Minute}, ""},
		{"apply_override_hold.json", Instruction{Action: ActionApply, SHA: sha64, Serial: 17, OverrideHold: true, NextCheckin: time.Minute}, ""},
		{"apply_extra_field.json", Instruction{Action: ActionApply, SHA: sha64, Serial: 1, NextCheckin: 30 * time.Second}, ""},
		{"none.json", Instruction{Action: ActionNone, NextCheckin: time.Minute}, ""},
		{"none_no_interval.json", Instruction{Action: ActionNone}, ""},
		{"down.json", Instruction{Action: ActionDown, Purge: true, NextCheckin: 2 * time.Minute}, ""},
		{"bad_action.json", Instruction{}, `field action "up"`},
		{"no_action.json", Instruction{}, "field action is missing"},
		{"apply_bad_sha.json", Instruction{}, "field sha"},
		{"apply_upper_sha.json", Instruction{}, "field sha"},
		{"apply_no_serial.json", Instruction{}, "field serial"},
		{"apply_zero_serial.json", Instruction{}, "field serial"},
		{"apply_serial_string.json", Instruction{}, `field "serial" has JSON type string`},
		{"negative_interval.json", Instruction{}, "field next_checkin_s"},
		{"array.json", Instruction{}, "not a JSON object"},
		{"html.txt", Instruction{}, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := decodeInstruction(fixture(t, "checkin/"+tt.file))
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.ErrorIs(t, err, ErrProtocol)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestDecodeLease(t *testing.T) {
	const grant = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlbnYtZGV2LTAxIiwiZW52X2lkIjoiZW52LWRldi0wMSJ9.c2lnbmF0dXJlLW9mLXRoZS1ncmFudC14eXo"
	tests := []struct {
		file       string
		wantErr    string
		registered []string // secrets that must be in the registry afterwards
		kind       error
	}{
		{"good.json", "", []string{grant}, nil},
		{"approle.json", "role_id, secret_id", []string{"7c1e0d55-approle-secret-id-value"}, ErrLeaseShape},
		{"wrapped.json", "wrap_info", []string{"hvs.CAESIwrappingtokenvalue0123456789"}, ErrLeaseShape},
		{"wrapping_token.json", "wrapping_token", []string{grant, "hvs.CAESIwrappingtokenvalue0123456789"}, ErrLeaseShape},
		{"grant_not_jwt.json", "field grant is not a JWT", []string{"not-a-jwt-at-all"}, ErrLeaseShape},
		{"grant_no_alg.json", "field grant is not a JWT: the header has no alg", nil, ErrLeaseShape},
		{"no_grant.json", "field grant is missing", nil, ErrLeaseShape},
		{"grant_number.json", `field "grant" has JSON type number`, nil, ErrProtocol},
		{"wrong_mount.json", `field auth_mount is "jwt", want "jwt-tenancy"`, []string{grant}, ErrLeaseShape},
		{"wrong_role.json", `field role is "admin", want "see-env"`, []string{grant}, ErrLeaseShape},
		{"expired.json", "field expires_at 2026-11-30T09:00:00Z is not in the future", []string{grant}, ErrLeaseShape},
		{"bad_expiry.json", "field expires_at", []string{grant}, ErrLeaseShape},
		{"no_expiry.json", "field expires_at is missing", []string{grant}, ErrLeaseShape},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			reg := &secrettest.Recorder{}
			l, err := decodeLease(fixture(t, "lease/"+tt.file), DefaultAuthMount, DefaultRole, fixedNow, reg)
			for _, s := range tt.registered {
				assert.True(t, reg.Has(s), "secret registered before validation")
			}
			for _, s := range []string{"jwt-tenancy", "see-env", "approle", "auth/approle/role/see-env/secret-id", "2026-11-30T10:10:00Z"} {
				assert.False(t, reg.Has(s), "%s is not a secret: registering it would mask it everywhere", s)
			}
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, grant, l.Grant.Reveal())
				assert.Equal(t, "jwt-tenancy", l.AuthMount)
				assert.Equal(t, "see-env", l.Role)
				assert.Equal(t, fixedNow.Add(10*time.Minute), l.ExpiresAt)
				return
			}
			require.ErrorIs(t, err, tt.kind)
			assert.Contains(t, err.Error(), tt.wantErr)
			for _, s := range reg.Values() {
				assert.NotContains(t, err.Error(), s, "the error never carries a secret")
			}
		})
	}
}

func TestDecodeErrorBody(t *testing.T) {
	tests := []struct {
		name, body, code, msg string
	}{
		{"shape", `{"error":{"code":"RATE_LIMITED","message":"budget spent"}}`, "RATE_LIMITED", "budget spent"},
		{"no_error", `{"message":"x"}`, "", ""},
		{"not_json", `<html>`, "", ""},
		{"code_number", `{"error":{"code":7,"message":"m"}}`, "", "m"},
		{"error_string", `{"error":"boom"}`, "", ""},
	}
	for _, tt := range tests {
		code, msg := decodeErrorBody([]byte(tt.body))
		assert.Equal(t, tt.code, code, tt.name)
		assert.Equal(t, tt.msg, msg, tt.name)
	}
}

func TestSanitise(t *testing.T) {
	const bearer = "hvs.CAESIJ0123456789abcdefghijklmnop"
	jwt := "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJlbnYifQ.c2lnbmF0dXJl"
	tests := []struct {
		name, in  string
		notIn     []string
		maxRunes  int
		wantExact string
	}{
		{"bearer", "token " + bearer + " is bad", []string{bearer}, 200, "token [REDACTED] is bad"},
		{"bearer_unknown_token_shape", "token s.abcdefghijklmnopqrstuvwx!", []string{"abcdefghijklmnopqrstuvwx"}, 200, ""},
		{"jwt", "grant " + jwt + " superseded", []string{jwt}, 200, "grant [REDACTED] superseded"},
		{"opaque", "key " + strings.Repeat("Zz9", 20), []string{strings.Repeat("Zz9", 20)}, 200, "key [REDACTED]"},
		{"control", "line1\nline2\x1b[31m", nil, 200, "line1 line2 [31m"},
		{"bounded", strings.Repeat("word ", 100), nil, 201, ""},
		{"invalid_utf8", "bad \xff byte", nil, 200, "bad ? byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sanitiseMessage(tt.in, bearer)
			for _, s := range tt.notIn {
				assert.NotContains(t, got, s)
			}
			assert.LessOrEqual(t, utf8.RuneCountInString(got), tt.maxRunes)
			if tt.wantExact != "" {
				assert.Equal(t, tt.wantExact, got)
			}
		})
	}
	assert.Equal(t, "RATE_LIMITED", sanitiseCode("RATE_LIMITED"))
	assert.Empty(t, sanitiseCode("rate limited "+bearer))
	assert.Empty(t, sanitiseCode(strings.Repeat("A", 65)))
}

func TestAPIErrorCode(t *testing.T) {
	tests := []struct {
		kind error
		code codes.Code
	}{
		{ErrUnauthenticated, codes.Unauthenticated},
		{ErrEnvMismatch, codes.AgentEnvMismatch},
		{ErrRateLimited, codes.RateLimited},
		{ErrLeaseShape, codes.LeaseShape},
		{ErrUnavailable, codes.Unavailable},
		{ErrBundleTooLarge, codes.BundleMalformed},
		{ErrProtocol, codes.TenancyProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.kind.Error(), func(t *testing.T) {
			var err error = &APIError{Op: "checkin", Kind: tt.kind}
			err = errors.Join(errors.New("context"), err)
			assert.ErrorIs(t, err, tt.kind)
			var ae *APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, tt.code, ae.Code())
		})
	}
}

func TestAPIErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *APIError
		want string
	}{
		{&APIError{Op: "lease", Status: 429, ServerCode: "RATE_LIMITED", Message: "budget spent", RetryAfter: 5 * time.Second, Kind: ErrRateLimited},
			"tenancy: lease: HTTP 429 RATE_LIMITED: budget spent (retry after 5s)"},
		{&APIError{Op: "checkin", ServerCode: "X", Err: errors.New("EOF"), RetryAfter: -time.Second}, "tenancy: checkin X: EOF"},
		{&APIError{Op: "report", Message: "bad sha"}, "tenancy: report: bad sha"},
		// Degenerate: no Op (was "tenancy: : HTTP 503").
		{&APIError{Status: 503}, "tenancy: HTTP 503"},
	} {
		assert.Equal(t, tc.want, tc.err.Error())
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 7 ", 7 * time.Second, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"99999999999", 0, false},
		{fixedNow.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"Monday, 30-Nov-26 10:01:30 GMT", 90 * time.Second, true},
		{"Mon, 30 Nov 2026 09:00:00 GMT", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, fixedNow)
		assert.Equal(t, tt.ok, ok, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func seedDir(f *testing.F, dir string) {
	entries, err := os.ReadDir(filepath.Join("testdata", dir))
	require.NoError(f, err)
	for _, e := range entries {
		f.Add(fixture(f, filepath.Join(dir, e.Name())))
	}
}

func FuzzDecodeInstruction(f *testing.F) {
	seedDir(f, "checkin")
	f.Fuzz(func(t *testing.T, data []byte) {
		ins, err := decodeInstruction(data)
		if err != nil {
			require.ErrorIs(t, err, ErrProtocol)
			assert.LessOrEqual(t, utf8.RuneCountInString(err.Error()), 400)
			return
		}
		assert.GreaterOrEqual(t, ins.NextCheckin, time.Duration(0))
		switch ins.Action {
		case ActionApply:
			assert.Regexp(t, `^[0-9a-f]{64}$`, ins.SHA)
			assert.GreaterOrEqual(t, ins.Serial, int64(1))
			assert.False(t, ins.Purge)
		case ActionDown:
			assert.Empty(t, ins.SHA)
			assert.False(t, ins.Retry || ins.Rollback)
		case ActionNone:
			assert.Equal(t, Instruction{Action: ActionNone, NextCheckin: ins.NextCheckin}, ins)
		default:
			t.Fatalf("action %q accepted", ins.Action)
		}
	})
}

func FuzzDecodeLease(f *testing.F) {
	seedDir(f, "lease")
	f.Fuzz(func(t *testing.T, data []byte) {
		reg := &secrettest.Recorder{}
		l, err := decodeLease(data, DefaultAuthMount, DefaultRole, fixedNow, reg)
		if err != nil {
			if !errors.Is(err, ErrLeaseShape) {
				require.ErrorIs(t, err, ErrProtocol)
			}
			for _, s := range reg.Values() {
				if len(s) >= 8 {
					assert.NotContains(t, err.Error(), s, "a registered secret reached the error text")
				}
			}
			return
		}
		assert.True(t, reg.Has(l.Grant.Reveal()), "the grant is registered")
		require.NoError(t, checkJWTShape(l.Grant.Reveal()))
		assert.Equal(t, DefaultAuthMount, l.AuthMount)
		assert.Equal(t, DefaultRole, l.Role)
		assert.True(t, l.ExpiresAt.After(fixedNow))
	})
}

var codeRE = regexp.MustCompile(`^([A-Z][A-Z0-9_]{0,63})?$`)

func FuzzDecodeErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":{"code":"RATE_LIMITED","message":"budget spent"}}`))
	f.Add([]byte(`{"error":{"code":"X","message":"token hvs.AAAAAAAAAAAAAAAAAAAAAA echoed"}}`))
	f.Add([]byte(`{"error":{"code":"bad code\n","message":"\u001b[31mred"}}`))
	f.Add([]byte(`{"error":null}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		code, msg := decodeErrorBody(data)
		assert.Regexp(t, codeRE, sanitiseCode(code))
		const bearer = "hvs.fuzzbearer0123456789"
		clean := sanitiseMessage(msg, bearer)
		assert.True(t, utf8.ValidString(clean))
		assert.LessOrEqual(t, utf8.RuneCountInString(clean), maxMessage+1)
		assert.NotContains(t, clean, bearer)
		for _, r := range clean {
			assert.False(t, unicode.IsControl(r), "control character %U kept", r)
		}
	})
}

// encoding/json matches struct fields case-insensitively: a hostile lease can spell
// the grant "GRANT" and the AppRole fields "Secret_ID". The shape check and the
// secret registration must see them as the struct decode does.
func TestDecodeLeaseFieldCase(t *testing.T) {
	const grant = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJlbnYtZGV2LTAxIn0.c2lnbmF0dXJlLWNhc2UteHl6"
	const rest = `"auth_mount":"jwt-tenancy","role":"see-env","expires_at":"2026-11-30T10:10:00Z"`
	t.Run("approle field in another case among valid ones", func(t *testing.T) {
		for _, f := range []string{"Secret_ID", "ROLE_ID", "Wrap_Info", "WRAPPING_TOKEN", "ſecret_id", "wrapping_toKen"} {
			reg := &secrettest.Recorder{}
			_, err := decodeLease([]byte(`{"grant":"`+grant+`",`+rest+`,"`+f+`":"planted-approle-value-0123"}`),
				DefaultAuthMount, DefaultRole, fixedNow, reg)
			require.ErrorIs(t, err, ErrLeaseShape, f)
			assert.NotContains(t, err.Error(), "planted-approle-value-0123")
		}
	})
	t.Run("grant in another case is registered", func(t *testing.T) {
		reg := &secrettest.Recorder{}
		l, err := decodeLease([]byte(`{"GRANT":"`+grant+`",`+rest+`}`), DefaultAuthMount, DefaultRole, fixedNow, reg)
		if err == nil {
			assert.Equal(t, grant, l.Grant.Reveal())
		}
		assert.True(t, reg.Has(grant), "the grant is registered whatever its key's case")
	})
	t.Run("two spellings of grant", func(t *testing.T) {
		reg := &secrettest.Recorder{}
		l, err := decodeLease([]byte(`{"grant":"x.y.z","Grant":"`+grant+`",`+rest+`}`), DefaultAuthMount, DefaultRole, fixedNow, reg)
		if err == nil {
			assert.True(t, reg.Has(l.Grant.Reveal()))
		}
		assert.True(t, reg.Has(grant))
	})
}
