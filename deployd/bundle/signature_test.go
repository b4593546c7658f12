package bundle

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// testKey returns a fixed Ed25519 key: n names it (seed n, n, n, …).
func testKey(n byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{n}, ed25519.SeedSize))
}

func testPub(t testing.TB, n byte) PublicKey {
	t.Helper()
	k, err := NewPublicKey(testKey(n).Public().(ed25519.PublicKey))
	require.NoError(t, err)
	return k
}

func ring(t testing.TB, ns ...byte) KeyRing {
	t.Helper()
	var keys []PublicKey
	for _, n := range ns {
		keys = append(keys, testPub(t, n))
	}
	r, err := NewKeyRing(keys...)
	require.NoError(t, err)
	return r
}

var (
	testSHA   = strings.Repeat("ab", 32)
	otherSHA  = strings.Repeat("cd", 32)
	testStmt  = Statement{SHA: testSHA, EnvID: testEnv, Serial: 17}
	testNow   = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	testUntil = testNow.Add(time.Hour)
)

func sign(t testing.TB, key byte, st Statement, expires time.Time) []byte {
	t.Helper()
	sig, err := Sign(testKey(key), st, SignOptions{Expires: expires})
	require.NoError(t, err)
	return sig
}

// TestSignatureFile pins the file of a fixed key and statement: the format is a
// contract (docs/BUNDLE.md, "Signature file"), and Ed25519 is deterministic.
func TestSignatureFile(t *testing.T) {
	got := sign(t, 1, testStmt, testUntil)
	id := testPub(t, 1).ID
	want := "monky-deployd signature v1\n" +
		"alg ed25519\n" +
		"key_id " + string(id) + "\n" +
		"env_id env-dev-01\n" +
		"sha " + testSHA + "\n" +
		"serial 17\n" +
		"expires 2026-03-04T11:00:00Z\n"
	require.True(t, strings.HasPrefix(string(got), want), "%s", got)
	sigLine := strings.TrimPrefix(string(got), want)
	require.True(t, strings.HasPrefix(sigLine, "sig ") && strings.HasSuffix(sigLine, "\n"))
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(sigLine, "sig "), "\n"))
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(testKey(1).Public().(ed25519.PublicKey), []byte(want), raw), "the signature covers the lines before it")
	assert.Equal(t, "34750f98bd59fcfc", string(id), "KeyIDOf: hex of the first 8 bytes of sha256 of the key (checked with openssl and sha256sum)")

	noExpiry := sign(t, 1, testStmt, time.Time{})
	assert.NotContains(t, string(noExpiry), "expires")
	s, err := ParseSignature(noExpiry)
	require.NoError(t, err)
	assert.True(t, s.Expires.IsZero())

	// Expiry is written in UTC, whole seconds.
	local := time.Date(2026, 3, 4, 12, 0, 0, 999, time.FixedZone("CET", 3600))
	assert.Contains(t, string(sign(t, 1, testStmt, local)), "\nexpires 2026-03-04T11:00:00Z\n")
}

type signatureCase struct {
	name   string
	data   []byte
	code   codes.Code // "" for a valid file
	detail string
}

// signatureCases are files for the parser: the valid ones and every way to break one.
// The fuzz test is seeded from them.
func signatureCases(t testing.TB) []signatureCase {
	good := string(sign(t, 1, testStmt, testUntil))
	noExp := string(sign(t, 1, testStmt, time.Time{}))
	lines := strings.SplitAfter(good, "\n")
	swap := func(i int, line string) string {
		l := append([]string(nil), lines...)
		l[i] = line
		return strings.Join(l, "")
	}
	sigLine := lines[7]
	b64 := strings.TrimSuffix(strings.TrimPrefix(sigLine, "sig "), "\n")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	inv := codes.SignatureInvalid
	return []signatureCase{
		{name: "valid", data: []byte(good)},
		{name: "valid without expiry", data: []byte(noExp)},
		{name: "an expiry in year 0 parses (long expired)", data: []byte(swap(6, "expires 0000-01-01T00:00:00Z\n"))},
		{name: "empty", data: nil, code: codes.SignatureMissing, detail: "empty"},
		{name: "too large", data: []byte(good + strings.Repeat("x", MaxSignatureSize)), code: inv, detail: "over 4096 bytes"},
		{name: "CRLF", data: []byte(strings.ReplaceAll(good, "\n", "\r\n")), code: inv, detail: "carriage return"},
		{name: "no final newline", data: []byte(strings.TrimSuffix(good, "\n")), code: inv, detail: "does not end with a newline"},
		{name: "truncated mid-file", data: []byte(good[:len(good)/2] + "\n"), code: inv, detail: ""},
		{name: "truncated before sig", data: []byte(strings.Join(lines[:7], "")), code: inv, detail: "line 8: the file ends before sig"},
		{name: "truncated signature", data: []byte(swap(7, "sig "+base64.StdEncoding.EncodeToString(raw[:40])+"\n")), code: inv, detail: "the signature is 40 bytes"},
		{name: "signature cut mid-base64", data: []byte(swap(7, sigLine[:41]+"\n")), code: inv, detail: "not standard base64"},
		{name: "base64 without padding", data: []byte(swap(7, "sig "+base64.RawStdEncoding.EncodeToString(raw)+"\n")), code: inv, detail: "not standard base64"},
		{name: "base64url", data: []byte(swap(7, "sig "+base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 64))+"\n")), code: inv, detail: "not standard base64"},
		{name: "other header", data: []byte(swap(0, "monky-deployd signature v2\n")), code: inv, detail: "line 1 is not"},
		{name: "wrong algorithm", data: []byte(swap(1, "alg rsa-pss-sha256\n")), code: inv, detail: "line 2: the algorithm is not ed25519"},
		{name: "algorithm in another case", data: []byte(swap(1, "alg Ed25519\n")), code: inv, detail: "the algorithm is not ed25519"},
		{name: "no alg line", data: []byte(swap(1, "")), code: inv, detail: "line 2 is not alg"},
		{name: "key_id upper case", data: []byte(swap(2, "key_id "+strings.ToUpper(string(testPub(t, 1).ID))+"\n")), code: inv, detail: "key_id is not 16"},
		{name: "key_id short", data: []byte(swap(2, "key_id abc\n")), code: inv, detail: "key_id is not 16"},
		{name: "bad env_id", data: []byte(swap(3, "env_id prod\n")), code: inv, detail: "env_id does not match"},
		{name: "sha upper case", data: []byte(swap(4, "sha "+strings.ToUpper(testSHA)+"\n")), code: inv, detail: "sha is not 64"},
		{name: "serial zero", data: []byte(swap(5, "serial 0\n")), code: inv, detail: "serial is not"},
		{name: "serial leading zero", data: []byte(swap(5, "serial 017\n")), code: inv, detail: "serial is not"},
		{name: "serial plus sign", data: []byte(swap(5, "serial +17\n")), code: inv, detail: "serial is not"},
		{name: "serial overflow", data: []byte(swap(5, "serial 9223372036854775808\n")), code: inv, detail: "serial is not"},
		{name: "expires not UTC", data: []byte(swap(6, "expires 2026-03-04T12:00:00+01:00\n")), code: inv, detail: "line 7: the expiry"},
		{name: "expires with fraction", data: []byte(swap(6, "expires 2026-03-04T11:00:00.5Z\n")), code: inv, detail: "the expiry"},
		{name: "fields out of order", data: []byte(lines[0] + lines[1] + lines[3] + lines[2] + strings.Join(lines[4:], "")), code: inv, detail: "line 3 is not key_id"},
		{name: "field twice", data: []byte(strings.Join(lines[:3], "") + lines[2] + strings.Join(lines[3:], "")), code: inv, detail: "line 4 is not env_id"},
		{name: "two spaces", data: []byte(swap(3, "env_id  env-dev-01\n")), code: inv, detail: "env_id does not match"},
		{name: "tab", data: []byte(swap(3, "env_id\tenv-dev-01\n")), code: inv, detail: "line 4 is not env_id"},
		{name: "unknown field", data: []byte(swap(6, "comment hello\n")), code: inv, detail: "line 7 is not sig"},
		{name: "data after sig", data: []byte(good + "sig " + b64 + "\n"), code: inv, detail: "line 9: data after the sig line"},
		{name: "empty line at the end", data: []byte(good + "\n"), code: inv, detail: "data after the sig line"},
		{name: "not a signature", data: []byte("-----BEGIN PGP SIGNATURE-----\n"), code: inv, detail: "line 1 is not"},
	}
}

func TestParseSignature(t *testing.T) {
	for _, tt := range signatureCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSignature(tt.data)
			if tt.code == "" {
				require.NoError(t, err)
				assert.Equal(t, testStmt, s.Statement)
				assert.Equal(t, testPub(t, 1).ID, s.KeyID)
				out, err := s.Marshal()
				require.NoError(t, err)
				assert.Equal(t, string(tt.data), string(out), "one encoding per signature")
				return
			}
			require.Error(t, err)
			assert.Nil(t, s)
			var se *SignatureError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.code, se.Code())
			assert.ErrorIs(t, err, ErrSignature)
			assert.Contains(t, se.Detail, tt.detail)
			assert.NotContains(t, err.Error(), "\r")
		})
	}
}

// FuzzParseSignature: the parser never panics; a file it accepts has exactly one
// encoding (Marshal gives the same bytes back); every refusal is a SignatureError of
// SIGNATURE_INVALID or, for an empty file, SIGNATURE_MISSING.
func FuzzParseSignature(f *testing.F) {
	for _, tt := range signatureCases(f) {
		f.Add(tt.data)
	}
	keys := ring(f, 1, 2)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSignature(data)
		if err != nil {
			var se *SignatureError
			require.ErrorAs(t, err, &se)
			if len(data) == 0 {
				require.Equal(t, codes.SignatureMissing, se.Code())
			} else {
				require.Equal(t, codes.SignatureInvalid, se.Code())
			}
			_, cerr := CheckSignature(data, keys, testStmt, testNow)
			require.Error(t, cerr)
			return
		}
		out, err := s.Marshal()
		require.NoError(t, err)
		require.Equal(t, data, out)
		require.Len(t, s.Sig, ed25519.SignatureSize)
		// An accepted file only passes CheckSignature if it is a real signature of the
		// statement by a trusted key: the fuzzer cannot forge one.
		if _, err := CheckSignature(data, keys, s.Statement, testNow); err == nil {
			require.True(t, ed25519.Verify(testKey(1).Public().(ed25519.PublicKey), s.Message(), s.Sig) ||
				ed25519.Verify(testKey(2).Public().(ed25519.PublicKey), s.Message(), s.Sig))
		}
	})
}

// TestCheckSignatureHostile: every way a hostile or stale signature is refused, each
// with its code, next to the signatures a box accepts (code "").
func TestCheckSignatureHostile(t *testing.T) {
	keys := ring(t, 1, 2) // 1 and 2 trusted: a rotation in progress
	good := sign(t, 1, testStmt, testUntil)
	tamper := func(f func(s *Signature)) []byte {
		s, err := ParseSignature(good)
		require.NoError(t, err)
		f(s)
		out, err := s.Marshal()
		require.NoError(t, err)
		return out
	}
	inv := codes.SignatureInvalid
	tests := []struct {
		name   string
		sig    []byte
		keys   KeyRing
		want   Statement
		now    time.Time
		code   codes.Code
		is     error
		detail string
		keyID  KeyID
	}{
		{name: "old key of a rotation", sig: good},
		{name: "new key of a rotation", sig: sign(t, 2, testStmt, testUntil), keyID: testPub(t, 2).ID},
		{name: "no expiry", sig: sign(t, 1, testStmt, time.Time{}), now: testNow.AddDate(10, 0, 0)},
		{name: "at the expiry", sig: good, now: testUntil},
		{name: "within the clock tolerance", sig: good, now: testUntil.Add(ClockTolerance)},
		{name: "a clock in another zone", sig: good, now: testUntil.In(time.FixedZone("X", -8*3600))},
		{name: "unsigned", sig: nil, code: codes.SignatureMissing, is: ErrSignatureMissing, detail: "the bundle is not signed; this box runs only bundles signed by a key it trusts"},
		{name: "empty signature", sig: []byte{}, code: codes.SignatureMissing, is: ErrSignatureMissing, detail: "the bundle is not signed"},
		{name: "another env", sig: sign(t, 1, Statement{SHA: testSHA, EnvID: "env-prod-01", Serial: 17}, testUntil),
			code: codes.SignatureInvalid, is: ErrSignatureInvalid, detail: "a signature of another bundle: signed for env_id env-prod-01, this box is env-dev-01"},
		{name: "another sha", sig: sign(t, 1, Statement{SHA: otherSHA, EnvID: testEnv, Serial: 17}, testUntil),
			code: codes.SignatureInvalid, is: ErrSignatureInvalid, detail: "signed for sha " + otherSHA + ", the bundle is " + testSHA},
		{name: "another serial", sig: sign(t, 1, Statement{SHA: testSHA, EnvID: testEnv, Serial: 16}, testUntil),
			code: codes.SignatureInvalid, is: ErrSignatureInvalid, detail: "signed for serial 16, the bundle is serial 17"},
		{name: "everything else", sig: sign(t, 1, Statement{SHA: otherSHA, EnvID: "env-dev-02", Serial: 3}, testUntil),
			code: codes.SignatureInvalid, detail: "env_id env-dev-02, this box is env-dev-01; signed for sha " + otherSHA + ", the bundle is " + testSHA + "; signed for serial 3"},
		{name: "statement edited after signing", sig: tamper(func(s *Signature) { s.EnvID = "env-prod-01" }), want: Statement{SHA: testSHA, EnvID: "env-prod-01", Serial: 17},
			code: codes.SignatureInvalid, is: ErrSignatureInvalid, detail: "does not verify with the trusted key " + string(testPub(t, 1).ID)},
		{name: "expiry pushed back after signing", sig: tamper(func(s *Signature) { s.Expires = s.Expires.AddDate(1, 0, 0) }), code: inv, detail: "does not verify"},
		{name: "expiry removed after signing", sig: tamper(func(s *Signature) { s.Expires = time.Time{} }), code: inv, detail: "does not verify"},
		{name: "signature bytes flipped", sig: tamper(func(s *Signature) { s.Sig[10] ^= 1 }), code: inv, detail: "does not verify"},
		{name: "key id swapped for another trusted key", sig: tamper(func(s *Signature) { s.KeyID = testPub(t, 2).ID }),
			code: codes.SignatureInvalid, detail: "does not verify with the trusted key " + string(testPub(t, 2).ID), keyID: testPub(t, 2).ID},
		{name: "unknown key", sig: sign(t, 3, testStmt, testUntil),
			code: codes.SignatureUnknownKey, is: ErrSignatureUnknownKey, detail: "key " + string(testPub(t, 3).ID) + " is not trusted by this box", keyID: testPub(t, 3).ID},
		{name: "removed key", sig: sign(t, 1, testStmt, testUntil), keys: ring(t, 2),
			code: codes.SignatureUnknownKey, is: ErrSignatureUnknownKey, detail: "(trusted: " + string(testPub(t, 2).ID) + ")"},
		{name: "truncated signature", sig: good[:len(good)-20], code: inv, detail: "does not end with a newline"},
		{name: "expired", sig: good, now: testUntil.Add(ClockTolerance + time.Second),
			code: codes.SignatureExpired, is: ErrSignatureExpired, detail: "the signature expired at 2026-03-04T11:00:00Z; it is 2026-03-04T11:10:01Z (tolerance 10m0s)"},
		{name: "expired long ago", sig: good, now: testUntil.AddDate(1, 0, 0), code: codes.SignatureExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := keys
			if tt.keys.Len() > 0 {
				k = tt.keys
			}
			id, err := CheckSignature(tt.sig, k, cmp.Or(tt.want, testStmt), cmp.Or(tt.now, testNow))
			wantID := tt.keyID
			if wantID == "" && tt.code != codes.SignatureMissing && tt.name != "truncated signature" {
				wantID = testPub(t, 1).ID
			}
			if tt.code == "" {
				require.NoError(t, err)
				assert.Equal(t, wantID, id)
				return
			}
			var se *SignatureError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.code, se.Code())
			assert.ErrorIs(t, err, ErrSignature)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			for _, other := range []error{ErrSignatureMissing, ErrSignatureInvalid, ErrSignatureUnknownKey, ErrSignatureExpired, ErrSignatureReplay} {
				if !errors.Is(signatureSentinels[tt.code], other) {
					assert.NotErrorIs(t, err, other)
				}
			}
			assert.NotErrorIs(t, err, ErrRefused, "a SignatureError is not a *RefusedError; Refusal() makes one")
			assert.Contains(t, se.Detail, tt.detail)
			assert.Equal(t, Refusal{Code: tt.code, Detail: se.Detail}, se.Refusal())
			assert.Equal(t, "signature refused: "+string(tt.code)+": "+se.Detail, err.Error())
			assert.Equal(t, wantID, id)
			assert.Equal(t, wantID, se.KeyID)
		})
	}
}

func TestCheckSignatureInvalidArguments(t *testing.T) {
	good := sign(t, 1, testStmt, testUntil)
	for name, tt := range map[string]struct {
		keys KeyRing
		st   Statement
		now  time.Time
	}{
		"no keys":     {KeyRing{}, testStmt, testNow},
		"no sha":      {ring(t, 1), Statement{EnvID: testEnv, Serial: 1}, testNow},
		"bad env":     {ring(t, 1), Statement{SHA: testSHA, EnvID: "x", Serial: 1}, testNow},
		"zero serial": {ring(t, 1), Statement{SHA: testSHA, EnvID: testEnv}, testNow},
		"no time":     {ring(t, 1), testStmt, time.Time{}},
	} {
		_, err := CheckSignature(good, tt.keys, tt.st, tt.now)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.NotErrorIs(t, err, ErrSignature, name)
	}
}

// TestCheckReplay: the ratchet refuses an older serial signed by any trusted key,
// unless the rollback is explicit; keys no longer trusted do not hold it.
func TestCheckReplay(t *testing.T) {
	k1, k2, k3 := testPub(t, 1).ID, testPub(t, 2).ID, testPub(t, 3).ID
	applied := Serials{}
	applied.Record(k1, 10)
	applied.Record(k2, 20)
	applied.Record(k2, 15) // a rollback does not lower the ratchet
	applied.Record(k3, 1000)
	assert.Equal(t, Serials{k1: 10, k2: 20, k3: 1000}, applied)
	keys := ring(t, 1, 2) // key 3 was removed

	floor, by := applied.Floor(keys)
	assert.Equal(t, int64(20), floor)
	assert.Equal(t, k2, by)

	for _, tt := range []struct {
		name     string
		serial   int64
		rollback bool
		keys     KeyRing
		refused  bool
	}{
		{name: "newer", serial: 21},
		{name: "the same again (a retry)", serial: 20},
		{name: "older serial replayed", serial: 19, refused: true},
		{name: "older serial under the old key's own floor", serial: 12, refused: true},
		{name: "explicit rollback", serial: 12, rollback: true},
		{name: "a removed key's serials do not count", serial: 21, keys: ring(t, 1, 2)},
		{name: "every key trusted again: its floor is back", serial: 21, keys: ring(t, 1, 2, 3), refused: true},
		{name: "nothing applied yet", serial: 1, keys: ring(t, 4)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := keys
			if tt.keys.Len() > 0 {
				k = tt.keys
			}
			err := CheckReplay(applied, k, tt.serial, tt.rollback)
			if !tt.refused {
				require.NoError(t, err)
				return
			}
			var se *SignatureError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, codes.SignatureReplay, se.Code())
			assert.ErrorIs(t, err, ErrSignatureReplay)
			assert.Contains(t, se.Detail, fmt.Sprintf("serial %d is lower than serial", tt.serial))
			assert.Contains(t, se.Detail, "only an explicit rollback goes back")
		})
	}
	assert.NoError(t, CheckReplay(nil, keys, 1, false), "a box that applied nothing signed")

	var fresh Serials // as a state without the field decodes
	fresh.Record(k1, 3)
	assert.Equal(t, Serials{k1: 3}, fresh)
}

// TestReplayOfAnOlderSignedBundle is the whole hostile case: a bundle that was
// validly signed, checked and applied, offered again after a newer one.
func TestReplayOfAnOlderSignedBundle(t *testing.T) {
	keys := ring(t, 1)
	applied := Serials{}
	old := Statement{SHA: otherSHA, EnvID: testEnv, Serial: 16}
	for _, st := range []Statement{old, testStmt} {
		id, err := CheckSignature(sign(t, 1, st, time.Time{}), keys, st, testNow)
		require.NoError(t, err)
		require.NoError(t, CheckReplay(applied, keys, st.Serial, false))
		applied.Record(id, st.Serial)
	}
	id, err := CheckSignature(sign(t, 1, old, time.Time{}), keys, old, testNow)
	require.NoError(t, err, "the old signature is still a valid signature")
	err = CheckReplay(applied, keys, old.Serial, false)
	require.ErrorIs(t, err, ErrSignatureReplay)
	assert.Equal(t, testPub(t, 1).ID, id)
	require.NoError(t, CheckReplay(applied, keys, old.Serial, true), "unless tenancy asks for the rollback")
}

func TestSignErrors(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	for name, tt := range map[string]struct {
		signer crypto.Signer
		st     Statement
		exp    time.Time
		is     error
		detail string
	}{
		"nil signer":          {signer: nil, st: testStmt, is: ErrInvalidArgument},
		"not ed25519":         {signer: ec, st: testStmt, is: ErrInvalidArgument},
		"bad statement":       {signer: testKey(1), st: Statement{SHA: "x", EnvID: testEnv, Serial: 1}, is: ErrInvalidArgument},
		"expiry too far":      {signer: testKey(1), st: testStmt, exp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), is: ErrInvalidArgument},
		"a signer that lies":  {signer: lyingSigner{testKey(1)}, st: testStmt, detail: "does not verify"},
		"a signer that fails": {signer: failingSigner{testKey(1)}, st: testStmt, is: errBroken},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Sign(tt.signer, tt.st, SignOptions{Expires: tt.exp})
			require.Error(t, err)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			assert.Contains(t, err.Error(), tt.detail)
		})
	}
}

// lyingSigner signs with another key than its public key.
type lyingSigner struct{ ed25519.PrivateKey }

func (l lyingSigner) Sign(r io.Reader, msg []byte, o crypto.SignerOpts) ([]byte, error) {
	return testKey(9).Sign(r, msg, o)
}

type failingSigner struct{ ed25519.PrivateKey }

func (failingSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errBroken
}

// TestReadStatement reads what a signature states from a bundle, as `sign` does.
func TestReadStatement(t *testing.T) {
	st, err := ReadStatement(context.Background(), bytes.NewReader(gzOf(t, goodTar(t))), Limits{})
	require.NoError(t, err)
	assert.Equal(t, Statement{SHA: goodSHA(t), EnvID: testEnv, Serial: 17}, st)

	for name, tt := range map[string]struct {
		data   []byte
		detail string
	}{
		"not a tar":        {[]byte("hello"), "not a tar"},
		"no manifest":      {tarOf(t, file("compose.yaml", goodCompose)), "no manifest.json in the bundle"},
		"invalid":          {tarOf(t, file(ManifestName, `{"schema":2}`)), "manifest.json"},
		"manifest twice":   {tarOf(t, append(goodEnts(t), goodEnts(t)[0])...), "appears twice"},
		"manifest too big": {tarOf(t, file(ManifestName, strings.Repeat(" ", DefaultMaxManifestSize+1))), "MaxManifestSize"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadStatement(context.Background(), bytes.NewReader(tt.data), Limits{})
			require.ErrorIs(t, err, ErrRefused)
			assert.Contains(t, err.Error(), tt.detail)
		})
	}
	_, err = ReadStatement(context.Background(), io.MultiReader(bytes.NewReader(goodTar(t)[:700]), &failingReader{}), Limits{})
	require.ErrorIs(t, err, errBroken)
	assert.NotErrorIs(t, err, ErrRefused)
}

// TestSignatureWithOpenSSL makes the signed message with printf and signs it with
// openssl, as the shell recipe of docs/BUNDLE.md does without monky-deployd, and checks
// that CheckSignature accepts the result; and the other way round.
func TestSignatureWithOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl on PATH")
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "renderer.key")
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	run(`openssl genpkey -algorithm ed25519 -out renderer.key 2>/dev/null`)
	pemData, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	priv, err := ParsePrivateKey(pemData)
	require.NoError(t, err, "keygen's format is openssl's")
	pub, err := NewPublicKey(priv.Public().(ed25519.PublicKey))
	require.NoError(t, err)

	// The recipe: key id and public key from openssl, the message with printf.
	got := run(`pub=$(openssl pkey -in renderer.key -pubout -outform DER | tail -c 32 | base64)
key_id=$(openssl pkey -in renderer.key -pubout -outform DER | tail -c 32 | sha256sum | cut -c1-16)
printf 'monky-deployd signature v1\nalg ed25519\nkey_id %s\nenv_id %s\nsha %s\nserial %s\n' \
  "$key_id" env-dev-01 ` + testSHA + ` 17 > msg
{ cat msg; printf 'sig %s\n' "$(openssl pkeyutl -sign -rawin -inkey renderer.key -in msg | base64 -w0)"; } > bundle.sig
echo "ed25519:$pub"`)
	assert.Equal(t, pub.String(), strings.TrimSpace(got), "the public key's text form from openssl")
	sig, err := os.ReadFile(filepath.Join(dir, "bundle.sig"))
	require.NoError(t, err)
	keys, err := NewKeyRing(pub)
	require.NoError(t, err)
	id, err := CheckSignature(sig, keys, testStmt, testNow)
	require.NoError(t, err, "%s", sig)
	assert.Equal(t, pub.ID, id)
	mine, err := Sign(priv, testStmt, SignOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(mine), string(sig), "Ed25519 is deterministic: the same file")

	// And openssl verifies what Sign wrote.
	s, err := ParseSignature(mine)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "msg2"), s.Message(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sig2"), s.Sig, 0o644))
	out := run(`openssl pkey -in renderer.key -pubout -out renderer.pub.pem && openssl pkeyutl -verify -pubin -inkey renderer.pub.pem -rawin -in msg2 -sigfile sig2`)
	assert.Contains(t, out, "Signature Verified Successfully")
}

func TestSignatureErrorZero(t *testing.T) {
	var e SignatureError
	assert.Equal(t, codes.SignatureInvalid, e.Code(), "a zero SignatureError still has a code")
	assert.True(t, errors.Is(&e, ErrSignature))
}

type publicKeyCase struct{ name, text, err string } // err "" for a valid key

func publicKeyCases(t testing.TB) []publicKeyCase {
	pub := testPub(t, 1)
	raw := base64.StdEncoding.EncodeToString(pub.Key)
	privPEM, err := MarshalPrivateKey(testKey(1))
	require.NoError(t, err)
	return []publicKeyCase{
		{name: "valid", text: "ed25519:" + raw},
		{name: "valid with a final newline", text: "ed25519:" + raw + "\n"},
		{name: "valid with spaces around", text: "  ed25519:" + raw + " "},
		{name: "empty", text: "", err: "the public key is empty"},
		{name: "no prefix", text: raw, err: "a public key is ed25519:<base64"},
		{name: "other algorithm", text: "rsa:" + raw, err: `algorithm "rsa" is not supported: only ed25519`},
		{name: "prefix in another case", text: "ED25519:" + raw, err: "a public key starts with ed25519:"},
		{name: "ssh format", text: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG…", err: "a public key is ed25519:"},
		{name: "not base64", text: "ed25519:not base64!", err: "not standard base64"},
		{name: "base64 without padding", text: "ed25519:" + strings.TrimRight(raw, "="), err: "not standard base64"},
		{name: "base64url", text: "ed25519:" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)), err: "not standard base64"},
		{name: "short key", text: "ed25519:" + base64.StdEncoding.EncodeToString(pub.Key[:31]), err: "this one is 31"},
		{name: "long key", text: "ed25519:" + base64.StdEncoding.EncodeToString(append(pub.Key, 0)), err: "this one is 33"},
		{name: "a private key by mistake", text: string(privPEM), err: "this is a private key"},
		{name: "a seed by mistake", text: "ed25519:" + base64.StdEncoding.EncodeToString(testKey(1)), err: "this one is 64"},
		{name: "two keys on a line", text: "ed25519:" + raw + " ed25519:" + raw, err: "not standard base64"},
	}
}

func TestParsePublicKey(t *testing.T) {
	want := testPub(t, 1)
	for _, tt := range publicKeyCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParsePublicKey(tt.text)
			if tt.err == "" {
				require.NoError(t, err)
				assert.Equal(t, want, k)
				assert.Equal(t, strings.TrimSpace(tt.text), k.String())
				return
			}
			require.ErrorIs(t, err, ErrInvalidKey)
			assert.Contains(t, err.Error(), tt.err)
			assert.Zero(t, k)
			// The error never repeats the key's text (a private key pasted by mistake).
			if len(tt.text) > 20 {
				assert.NotContains(t, err.Error(), strings.TrimSpace(tt.text)[8:20])
			}
		})
	}
}

// FuzzParsePublicKey: a key it accepts prints back to the same text, trimmed, and has
// the id of its bytes; an error never repeats the text.
func FuzzParsePublicKey(f *testing.F) {
	for _, tt := range publicKeyCases(f) {
		f.Add(tt.text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePublicKey(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidKey)
			if trimmed := strings.TrimSpace(s); len(trimmed) > 24 {
				require.NotContains(t, err.Error(), trimmed)
			}
			return
		}
		require.Equal(t, strings.TrimSpace(s), k.String())
		require.Len(t, k.Key, ed25519.PublicKeySize)
		require.Equal(t, KeyIDOf(k.Key), k.ID)
	})
}

func TestKeyRing(t *testing.T) {
	k1, k2 := testPub(t, 1), testPub(t, 2)
	r, err := ParseKeyRing([]string{k2.String(), k1.String(), k1.String() + "\n"})
	require.NoError(t, err)
	assert.Equal(t, 2, r.Len(), "the same key twice counts once")
	assert.Equal(t, []KeyID{min(k1.ID, k2.ID), max(k1.ID, k2.ID)}, r.IDs())
	got, ok := r.Lookup(k1.ID)
	require.True(t, ok)
	assert.Equal(t, k1, got)
	_, ok = r.Lookup(testPub(t, 3).ID)
	assert.False(t, ok)
	assert.Zero(t, KeyRing{}.Len())

	_, err = ParseKeyRing([]string{k1.String(), "ed25519:x"})
	require.ErrorIs(t, err, ErrInvalidKey)
	assert.Contains(t, err.Error(), "key 2: ")

	_, err = NewKeyRing(PublicKey{ID: "0000000000000000", Key: k1.Key})
	require.ErrorIs(t, err, ErrInvalidKey)
	assert.Contains(t, err.Error(), "its id is "+string(k1.ID))
	_, err = NewKeyRing(PublicKey{ID: k1.ID, Key: k1.Key[:5]})
	require.ErrorIs(t, err, ErrInvalidKey)

	// The ring keeps its own copy.
	mine := PublicKey{ID: k1.ID, Key: append(ed25519.PublicKey(nil), k1.Key...)}
	r, err = NewKeyRing(mine)
	require.NoError(t, err)
	mine.Key[0] ^= 1
	got, _ = r.Lookup(k1.ID)
	assert.Equal(t, k1, got)

	_, err = NewPublicKey(make([]byte, 31))
	require.ErrorIs(t, err, ErrInvalidKey)
}

func TestPrivateKey(t *testing.T) {
	priv := testKey(1)
	data, err := MarshalPrivateKey(priv)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "-----BEGIN PRIVATE KEY-----\n"), "%s", data)
	back, err := ParsePrivateKey(data)
	require.NoError(t, err)
	assert.Equal(t, priv, back)

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	seedText := base64.StdEncoding.EncodeToString(priv.Seed())
	for name, tt := range map[string]struct {
		data string
		err  string
	}{
		"empty":            {"", "not a PEM private key"},
		"public key":       {testPub(t, 1).String(), "not a PEM private key"},
		"raw seed":         {seedText, "not a PEM private key"},
		"another type":     {string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: block.Bytes})), "not a PKCS #8 PRIVATE KEY"},
		"encrypted":        {string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: block.Bytes})), "encrypted"},
		"headers":          {string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: block.Bytes})), "headers"},
		"two keys":         {string(data) + string(data), "data after"},
		"garbage DER":      {string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: block.Bytes[:20]})), "not a valid PKCS #8 key"},
		"another key type": {string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})), "only ed25519"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePrivateKey([]byte(tt.data))
			require.ErrorIs(t, err, ErrInvalidKey)
			assert.Contains(t, err.Error(), tt.err)
			assert.NotContains(t, err.Error(), seedText)
			assert.NotContains(t, err.Error(), "MC4CAQAwBQYDK2Vw", "never a line of the PEM")
		})
	}
	_, err = MarshalPrivateKey(priv[:10])
	require.ErrorIs(t, err, ErrInvalidKey)
}
