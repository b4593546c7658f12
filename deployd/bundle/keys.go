package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrInvalidKey is returned (wrapped) for a public or private key that cannot be
// read or used. The message says what is wrong and never repeats the key's text:
// a private key pasted where a public one belongs must not reach a log.
var ErrInvalidKey = errors.New("bundle: invalid key")

// KeyAlgorithm is the only signature algorithm: Ed25519 (RFC 8032), from the
// standard library's crypto/ed25519.
const KeyAlgorithm = "ed25519"

// publicKeyPrefix starts the text form of a public key.
const publicKeyPrefix = KeyAlgorithm + ":"

// KeyID names a public key: the lowercase hex of the first 8 bytes of the sha256 of
// the raw 32-byte key (16 hex digits). It is derived, never chosen, so that a key id
// cannot lie about its key.
type KeyID string

// KeyIDOf returns the key id of an Ed25519 public key.
func KeyIDOf(pub ed25519.PublicKey) KeyID {
	sum := sha256.Sum256(pub)
	return KeyID(hex.EncodeToString(sum[:8]))
}

// validKeyID reports whether s has the shape of a KeyID.
func validKeyID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// PublicKey is a trusted signing key of the renderer and its id.
type PublicKey struct {
	// ID is KeyIDOf(Key).
	ID KeyID
	// Key is the raw 32-byte Ed25519 public key.
	Key ed25519.PublicKey
}

// NewPublicKey returns the PublicKey of a raw Ed25519 public key.
func NewPublicKey(pub ed25519.PublicKey) (PublicKey, error) {
	if len(pub) != ed25519.PublicKeySize {
		return PublicKey{}, fmt.Errorf("%w: an ed25519 public key is %d bytes, not %d", ErrInvalidKey, ed25519.PublicKeySize, len(pub))
	}
	k := slices.Clone(pub)
	return PublicKey{ID: KeyIDOf(k), Key: k}, nil
}

// ParsePublicKey reads the text form of a public key, as a box's config and a .pub
// file hold it: "ed25519:" and the standard base64 (with padding) of the raw 32-byte
// key, 52 characters in all. Surrounding white space (a file's final newline) is
// ignored; anything else is an error wrapping ErrInvalidKey.
func ParsePublicKey(s string) (PublicKey, error) {
	s = strings.TrimSpace(s)
	bad := func(format string, args ...any) (PublicKey, error) {
		return PublicKey{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidKey}, args...)...)
	}
	if strings.Contains(s, "PRIVATE KEY") {
		return bad("this is a private key; give the public key (%s<base64>, the .pub file of monky-deployd keygen)", publicKeyPrefix)
	}
	alg, b64, ok := strings.Cut(s, ":")
	switch {
	case s == "":
		return bad("the public key is empty")
	case !ok:
		return bad("a public key is %s<base64 of the 32-byte key>", publicKeyPrefix)
	case alg != KeyAlgorithm:
		if isAlgName(alg) {
			return bad("algorithm %q is not supported: only %s", alg, KeyAlgorithm)
		}
		return bad("a public key starts with %s", publicKeyPrefix)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return bad("the key after %s is not standard base64", publicKeyPrefix)
	}
	if len(raw) != ed25519.PublicKeySize {
		return bad("an ed25519 public key is %d bytes, this one is %d", ed25519.PublicKeySize, len(raw))
	}
	return NewPublicKey(raw)
}

// isAlgName reports whether s looks like an algorithm name, which an error message may
// repeat (a key's base64 never does: it is longer).
func isAlgName(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// String returns the text form ParsePublicKey reads: "ed25519:<base64>".
func (k PublicKey) String() string {
	return publicKeyPrefix + base64.StdEncoding.EncodeToString(k.Key)
}

// KeyRing is the set of public keys a box trusts. Rotation is two keys at once: the
// renderer's new key is added to every box, the renderer signs with it, and the old
// key is removed once no bundle signed with it is needed; a signature by a removed
// key is SIGNATURE_UNKNOWN_KEY. The zero KeyRing is empty.
type KeyRing struct {
	keys map[KeyID]PublicKey
}

// NewKeyRing returns a key ring holding keys; the same key twice counts once. A key
// whose ID is not KeyIDOf(Key), or that is not 32 bytes, is an error wrapping
// ErrInvalidKey.
func NewKeyRing(keys ...PublicKey) (KeyRing, error) {
	r := KeyRing{keys: make(map[KeyID]PublicKey, len(keys))}
	for i, k := range keys {
		if len(k.Key) != ed25519.PublicKeySize {
			return KeyRing{}, fmt.Errorf("%w: key %d: an ed25519 public key is %d bytes, not %d", ErrInvalidKey, i+1, ed25519.PublicKeySize, len(k.Key))
		}
		if id := KeyIDOf(k.Key); k.ID != id {
			return KeyRing{}, fmt.Errorf("%w: key %d: its id is %s, not %q", ErrInvalidKey, i+1, id, k.ID)
		}
		r.keys[k.ID] = PublicKey{ID: k.ID, Key: slices.Clone(k.Key)}
	}
	return r, nil
}

// ParseKeyRing reads each text with ParsePublicKey, as a box's config lists them; an
// error names the key by its position (1-based), never by its text.
func ParseKeyRing(texts []string) (KeyRing, error) {
	keys := make([]PublicKey, 0, len(texts))
	for i, s := range texts {
		k, err := ParsePublicKey(s)
		if err != nil {
			return KeyRing{}, fmt.Errorf("key %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return NewKeyRing(keys...)
}

// Len returns the number of keys.
func (r KeyRing) Len() int { return len(r.keys) }

// Lookup returns the key of id.
func (r KeyRing) Lookup(id KeyID) (PublicKey, bool) {
	k, ok := r.keys[id]
	return k, ok
}

// IDs returns the key ids, sorted.
func (r KeyRing) IDs() []KeyID { return slices.Sorted(maps.Keys(r.keys)) }

// privateKeyPEMType is the PEM type of a PKCS #8 private key.
const privateKeyPEMType = "PRIVATE KEY"

// ParsePrivateKey reads an Ed25519 private key in PKCS #8 PEM ("-----BEGIN PRIVATE
// KEY-----"), as `monky-deployd keygen` and `openssl genpkey -algorithm ed25519`
// write it. An encrypted key, another algorithm, another PEM type or data after the
// block is an error wrapping ErrInvalidKey; no error repeats any of the file.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	switch {
	case block == nil:
		return nil, fmt.Errorf("%w: not a PEM private key (-----BEGIN %s-----)", ErrInvalidKey, privateKeyPEMType)
	case block.Type == "ENCRYPTED PRIVATE KEY":
		return nil, fmt.Errorf("%w: the private key is encrypted; give an unencrypted PKCS #8 key", ErrInvalidKey)
	case block.Type != privateKeyPEMType:
		return nil, fmt.Errorf("%w: the PEM block is not a PKCS #8 %s", ErrInvalidKey, privateKeyPEMType)
	case len(block.Headers) > 0:
		return nil, fmt.Errorf("%w: the PEM block has headers (an encrypted key?)", ErrInvalidKey)
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, fmt.Errorf("%w: data after the private key's PEM block", ErrInvalidKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: the PEM block is not a valid PKCS #8 key", ErrInvalidKey)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: the private key is a %T, only %s is supported", ErrInvalidKey, k, KeyAlgorithm)
	}
	return priv, nil
}

// MarshalPrivateKey returns priv in the PKCS #8 PEM form ParsePrivateKey reads. The
// result is the secret itself: write it to a file of mode 0600 and nowhere else.
func MarshalPrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: an ed25519 private key is %d bytes", ErrInvalidKey, ed25519.PrivateKeySize)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: privateKeyPEMType, Bytes: der}), nil
}
