package bundle

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func publicKeyCases(t testing.TB) []struct {
	name string
	text string
	err  string // "" for a valid key
} {
	pub := testPub(t, 1)
	raw := base64.StdEncoding.EncodeToString(pub.Key)
	privPEM, err := MarshalPrivateKey(testKey(1))
	require.NoError(t, err)
	return []struct {
		name string
		text string
		err  string
	}{
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
	ids := []KeyID{k1.ID, k2.ID}
	if ids[0] > ids[1] {
		ids[0], ids[1] = ids[1], ids[0]
	}
	assert.Equal(t, ids, r.IDs())
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
