package bundle

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
)

// Statement is what a signature says: this bundle sha is the bundle of serial Serial
// for EnvID. It is what the box expects (want of CheckSignature) and what the
// renderer signs; the tar bytes themselves are never signed, the sha stands for them
// (docs/BUNDLE.md, "Signatures").
type Statement struct {
	// SHA is the bundle sha (64 lowercase hex digits).
	SHA string
	// EnvID is the environment the bundle is for.
	EnvID string
	// Serial is the bundle's serial (manifest.json's serial), at least 1.
	Serial int64
}

// check returns why s is not a statement that can be signed, or "".
func (s Statement) check() string {
	switch {
	case !ids.ValidSHA(s.SHA):
		return "the sha is not 64 lowercase hex digits"
	case !ids.ValidEnvID(s.EnvID):
		return "the env_id does not match " + ids.EnvIDPattern
	case s.Serial < 1:
		return "the serial is not at least 1"
	}
	return ""
}

// ReadStatement reads the bundle stream r once and returns what a signature of it
// states: its sha and its manifest's env_id and serial. It is for a signer that did
// not Pack the bundle itself (`monky-deployd sign`). A stream SHA refuses, or a
// manifest that is missing or that Verify would refuse on its own, is a *RefusedError
// (BUNDLE_MALFORMED, MANIFEST_PATHS or SECRET_PATH). Like SHA, it does not run the
// other checks of Verify.
func ReadStatement(ctx context.Context, r io.Reader, lim Limits) (Statement, error) {
	l := lim.withDefaults()
	var manifest []byte
	var tooLarge bool
	res, err := scan(ctx, r, lim, scanOpts{file: func(name string, size int64, r io.Reader, h hash.Hash, buf []byte) error {
		if name != ManifestName {
			_, err := io.CopyBuffer(h, r, buf)
			return err
		}
		if size > l.MaxManifestSize {
			tooLarge = true
			_, err := io.CopyBuffer(h, r, buf)
			return err
		}
		var b bytes.Buffer
		if _, err := io.CopyBuffer(io.MultiWriter(&b, h), r, buf); err != nil {
			return err
		}
		manifest = b.Bytes()
		return nil
	}})
	if err != nil {
		return Statement{}, err
	}
	var rs refusals
	if !res.complete || res.ambiguous {
		for _, r := range res.rs.list {
			if r.Code == codes.BundleMalformed {
				rs.list = append(rs.list, r)
			}
		}
		return Statement{}, &RefusedError{Refusals: rs.result()}
	}
	sha := listingSHA(res.files)
	switch {
	case tooLarge:
		rs.add(codes.BundleMalformed, "%s is over the limit of %d bytes (MaxManifestSize)", ManifestName, l.MaxManifestSize)
	case manifest == nil:
		rs.add(codes.BundleMalformed, "no %s in the bundle", ManifestName)
	default:
		m, mrs := decodeManifest(manifest)
		if len(mrs) == 0 {
			return Statement{SHA: sha, EnvID: m.EnvID, Serial: m.Serial}, nil
		}
		rs.list = mrs
	}
	return Statement{}, &RefusedError{SHA: sha, Refusals: rs.result()}
}

// ClockTolerance is how far past its expiry a signature is still accepted: the
// clocks of laptops and of boxes without NTP drift, and a renderer may sign with a
// short validity. Ten minutes.
const ClockTolerance = 10 * time.Minute

// MaxSignatureSize bounds a signature file (a real one is about 280 bytes); a
// client reads at most this much of it.
const MaxSignatureSize = 4096

// SignatureHeader is the first line of a signature file and of the signed message:
// it names the format and its version, and keeps the message apart from anything
// else a renderer's key might sign.
const SignatureHeader = "monky-deployd signature v1"

// expiresLayout is the one form of an expiry: RFC 3339 in UTC, whole seconds.
const expiresLayout = "2006-01-02T15:04:05Z"

// Signature is a parsed signature file (docs/BUNDLE.md, "Signature file").
type Signature struct {
	// Statement is what was signed.
	Statement
	// KeyID names the key that signed.
	KeyID KeyID
	// Expires is when the signature stops being valid (UTC, whole seconds); zero for
	// a signature that does not expire.
	Expires time.Time
	// Sig is the Ed25519 signature of Message(), 64 bytes.
	Sig []byte
}

// Message returns the bytes the signature covers: the lines of the file before its
// sig line, each ending in "\n":
//
//	monky-deployd signature v1
//	alg ed25519
//	key_id <key id>
//	env_id <env_id>
//	sha <sha>
//	serial <serial>
//	expires <YYYY-MM-DDTHH:MM:SSZ>     (only when the signature expires)
func (s *Signature) Message() []byte {
	var b bytes.Buffer
	b.WriteString(SignatureHeader + "\n")
	b.WriteString("alg " + KeyAlgorithm + "\n")
	b.WriteString("key_id " + string(s.KeyID) + "\n")
	b.WriteString("env_id " + s.EnvID + "\n")
	b.WriteString("sha " + s.SHA + "\n")
	b.WriteString("serial " + strconv.FormatInt(s.Serial, 10) + "\n")
	if !s.Expires.IsZero() {
		b.WriteString("expires " + s.Expires.UTC().Format(expiresLayout) + "\n")
	}
	return b.Bytes()
}

// Marshal returns the signature file: Message() followed by "sig <base64>\n" (standard
// base64 with padding of the 64-byte signature). ParseSignature reads it back.
func (s *Signature) Marshal() ([]byte, error) {
	if why := s.check(); why != "" {
		return nil, fmt.Errorf("%w: signature: %s", ErrInvalidArgument, why)
	}
	return append(s.Message(), "sig "+base64.StdEncoding.EncodeToString(s.Sig)+"\n"...), nil
}

// check returns why s cannot be written as a signature file, or "".
func (s *Signature) check() string {
	switch {
	case s.Statement.check() != "":
		return s.Statement.check()
	case !validKeyID(string(s.KeyID)):
		return "the key_id is not 16 lowercase hex digits"
	case !s.Expires.IsZero() && !s.Expires.Equal(s.Expires.Truncate(time.Second)):
		return "the expiry is not a whole second"
	case !s.Expires.IsZero() && (s.Expires.UTC().Year() < 0 || s.Expires.UTC().Year() > 9999):
		return "the expiry is not between years 0 and 9999"
	case len(s.Sig) != ed25519.SignatureSize:
		return fmt.Sprintf("an ed25519 signature is %d bytes, not %d", ed25519.SignatureSize, len(s.Sig))
	}
	return ""
}

// signatureFields are the names of the lines of a signature file, in order; expires
// is optional.
var signatureFields = []string{"alg", "key_id", "env_id", "sha", "serial", "expires", "sig"}

// ParseSignature reads a signature file. The format is strict, so that a signature
// has one encoding: the lines and their order are fixed, one space after each name,
// "\n" line endings, a final newline, nothing else. An error is a *SignatureError
// with SIGNATURE_INVALID (an empty file is SIGNATURE_MISSING); its detail names the
// line and the field, never repeating the file's bytes beyond validated values.
//
// ParseSignature does not check the signature itself: CheckSignature does.
func ParseSignature(data []byte) (*Signature, error) {
	lines, err := signatureLines(data)
	if err != nil {
		return nil, err
	}
	var s Signature
	n := 1 // lines read
	for _, name := range signatureFields {
		v, ok := "", false
		if n < len(lines) {
			v, ok = strings.CutPrefix(lines[n], name+" ")
		}
		switch {
		case ok:
			n++
		case name == "expires":
			continue
		case n >= len(lines):
			return nil, invalidSignature("line %d: the file ends before %s (truncated?)", n+1, name)
		default:
			return nil, invalidSignature("line %d is not %s", n+1, name)
		}
		if problem := s.set(name, v); problem != "" {
			return nil, invalidSignature("line %d: %s", n, problem)
		}
	}
	if n != len(lines) {
		return nil, invalidSignature("line %d: data after the sig line", n+1)
	}
	return &s, nil
}

// invalidSignature is a SIGNATURE_INVALID refusal of the signature file.
func invalidSignature(format string, args ...any) error {
	return sigErr(codes.SignatureInvalid, "", format, args...)
}

// signatureLines checks the signature file's framing (size, line endings, the final
// newline, the header) and returns its lines, the header first.
func signatureLines(data []byte) ([]string, error) {
	switch {
	case len(data) == 0:
		return nil, sigErr(codes.SignatureMissing, "", "the signature is empty")
	case len(data) > MaxSignatureSize:
		return nil, invalidSignature("the signature file is over %d bytes", MaxSignatureSize)
	case bytes.IndexByte(data, '\r') >= 0:
		return nil, invalidSignature("the signature file has a carriage return (CRLF line endings?)")
	case data[len(data)-1] != '\n':
		return nil, invalidSignature("the signature file does not end with a newline (truncated?)")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if lines[0] != SignatureHeader {
		return nil, invalidSignature("line 1 is not %q", SignatureHeader)
	}
	return lines, nil
}

// set parses the value v of the field name into s, and returns what is wrong with
// it ("" when nothing is).
func (s *Signature) set(name, v string) string {
	switch name {
	case "alg":
		if v != KeyAlgorithm {
			return "the algorithm is not " + KeyAlgorithm + " (the only one)"
		}
	case "key_id":
		if !validKeyID(v) {
			return "the key_id is not 16 lowercase hex digits"
		}
		s.KeyID = KeyID(v)
	case "env_id":
		if !ids.ValidEnvID(v) {
			return "the env_id does not match " + ids.EnvIDPattern
		}
		s.EnvID = v
	case "sha":
		if !ids.ValidSHA(v) {
			return "the sha is not 64 lowercase hex digits"
		}
		s.SHA = v
	case "serial":
		serial, err := strconv.ParseInt(v, 10, 64)
		if err != nil || serial < 1 || strconv.FormatInt(serial, 10) != v {
			return "the serial is not a decimal integer of at least 1"
		}
		s.Serial = serial
	case "expires":
		t, err := time.Parse(expiresLayout, v)
		if err != nil || t.Format(expiresLayout) != v {
			return "the expiry is not YYYY-MM-DDTHH:MM:SSZ (UTC)"
		}
		s.Expires = t
	case "sig":
		raw, err := base64.StdEncoding.Strict().DecodeString(v)
		if err != nil {
			return "the signature is not standard base64 (truncated?)"
		}
		if len(raw) != ed25519.SignatureSize {
			return fmt.Sprintf("the signature is %d bytes, an ed25519 signature is %d (truncated?)", len(raw), ed25519.SignatureSize)
		}
		s.Sig = raw
	}
	return ""
}

// SignOptions are the choices of Sign.
type SignOptions struct {
	// Expires, when not zero, is when the signature stops being valid; it is
	// truncated to the second and written in UTC. A box accepts the signature until
	// Expires + ClockTolerance. Zero: the signature does not expire.
	Expires time.Time
}

// Sign signs st with signer and returns the signature file (Signature.Marshal).
// signer is an ed25519.PrivateKey or any crypto.Signer whose public key is Ed25519
// (a KMS, an HSM); another key type, or a statement that is not valid, is an error
// wrapping ErrInvalidArgument. The signature is checked with the public key before
// it is returned, so that a faulty signer never produces a file a box refuses.
func Sign(signer crypto.Signer, st Statement, opt SignOptions) ([]byte, error) {
	if signer == nil {
		return nil, fmt.Errorf("%w: Sign needs a signer", ErrInvalidArgument)
	}
	pub, ok := signer.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: the signing key is not an %s key", ErrInvalidArgument, KeyAlgorithm)
	}
	if why := st.check(); why != "" {
		return nil, fmt.Errorf("%w: statement: %s", ErrInvalidArgument, why)
	}
	s := &Signature{Statement: st, KeyID: KeyIDOf(pub)}
	if !opt.Expires.IsZero() {
		s.Expires = opt.Expires.UTC().Truncate(time.Second)
	}
	msg := s.Message()
	sig, err := signer.Sign(nil, msg, crypto.Hash(0))
	if err != nil {
		return nil, fmt.Errorf("bundle: signing: %w", err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return nil, errors.New("bundle: signing: the signer's signature does not verify with its public key")
	}
	s.Sig = sig
	return s.Marshal()
}

// CheckSignature decides whether a box that trusts keys may run the bundle want
// names: sig is the bundle's signature file (nil or empty: none was published).
// It returns the id of the key that signed, and nil, when sig is a valid Ed25519
// signature by a key of keys of exactly want (sha, env_id and serial) that has not
// expired by now (beyond ClockTolerance).
//
// Otherwise the error is a *SignatureError: SIGNATURE_MISSING (no signature),
// SIGNATURE_INVALID (does not parse, another algorithm, does not verify, or signed
// for another sha, env_id or serial), SIGNATURE_UNKNOWN_KEY (a key keys does not hold)
// or SIGNATURE_EXPIRED. The key id is returned with the error whenever the file named
// one. An empty keys, a want that is not a valid statement or a zero now is an error
// of the caller (ErrInvalidArgument): a box without trusted keys does not call it.
//
// It is pure: no I/O, no clock but now. Replays are CheckReplay's.
func CheckSignature(sig []byte, keys KeyRing, want Statement, now time.Time) (KeyID, error) {
	switch {
	case keys.Len() == 0:
		return "", fmt.Errorf("%w: CheckSignature needs at least one trusted key", ErrInvalidArgument)
	case want.check() != "":
		return "", fmt.Errorf("%w: the expected statement: %s", ErrInvalidArgument, want.check())
	case now.IsZero():
		return "", fmt.Errorf("%w: CheckSignature needs the time", ErrInvalidArgument)
	}
	if len(sig) == 0 {
		return "", sigErr(codes.SignatureMissing, "", "the bundle is not signed; this box runs only bundles signed by a key it trusts")
	}
	s, err := ParseSignature(sig)
	if err != nil {
		return "", err
	}
	id := s.KeyID
	key, ok := keys.Lookup(id)
	if !ok {
		return id, sigErr(codes.SignatureUnknownKey, id, "key %s is not trusted by this box (trusted: %s)", id, joinIDs(keys.IDs()))
	}
	if !ed25519.Verify(key.Key, s.Message(), s.Sig) {
		return id, sigErr(codes.SignatureInvalid, id, "the signature does not verify with the trusted key %s", id)
	}
	var diffs []string
	if s.EnvID != want.EnvID {
		diffs = append(diffs, fmt.Sprintf("signed for env_id %s, this box is %s", s.EnvID, want.EnvID))
	}
	if s.SHA != want.SHA {
		diffs = append(diffs, fmt.Sprintf("signed for sha %s, the bundle is %s", s.SHA, want.SHA))
	}
	if s.Serial != want.Serial {
		diffs = append(diffs, fmt.Sprintf("signed for serial %d, the bundle is serial %d", s.Serial, want.Serial))
	}
	if len(diffs) > 0 {
		return id, sigErr(codes.SignatureInvalid, id, "a signature of another bundle: %s", strings.Join(diffs, "; "))
	}
	if !s.Expires.IsZero() && now.After(s.Expires.Add(ClockTolerance)) {
		return id, sigErr(codes.SignatureExpired, id, "the signature expired at %s; it is %s (tolerance %s)",
			s.Expires.Format(expiresLayout), now.UTC().Format(expiresLayout), ClockTolerance)
	}
	return id, nil
}

func joinIDs(ids []KeyID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ", ")
}

// Serials is the replay ratchet of a box: the highest serial it applied under each
// key id. The agent keeps it in its state and updates it with Record after every
// successful apply of a signed bundle.
type Serials map[KeyID]int64

// Record notes that a bundle of serial, signed by id, was applied; a nil map is made.
// The ratchet only goes up: an explicit rollback to an older serial does not lower
// it, so that the bundles between stay refused without another explicit rollback.
func (s *Serials) Record(id KeyID, serial int64) {
	if *s == nil {
		*s = Serials{}
	}
	if serial > (*s)[id] {
		(*s)[id] = serial
	}
}

// Floor returns the highest serial applied under a key keys still trusts, and that
// key (the smallest id among equals); 0 and "" when there is none. Serials of keys
// no longer trusted do not count: a key removed after a compromise takes the serials
// it pushed with it, so that the box follows the renderer's new key again without a
// hand-edited state.
func (s Serials) Floor(keys KeyRing) (int64, KeyID) {
	var floor int64
	var by KeyID
	for _, id := range keys.IDs() {
		if n := s[id]; n > floor {
			floor, by = n, id
		}
	}
	return floor, by
}

// CheckReplay refuses a signed bundle of serial that is lower than applied.Floor(keys),
// the highest serial the box applied under any key it still trusts (whichever key
// signed the new one, so that an old key kept for a rotation cannot bring back its
// old bundles), with a *SignatureError of SIGNATURE_REPLAY. The same serial again is
// not a replay (a retry, a re-apply). rollback is the check-in's explicit rollback:
// it lets an older serial through, whose signature CheckSignature has checked like
// any other (an expired one stays refused).
func CheckReplay(applied Serials, keys KeyRing, serial int64, rollback bool) error {
	floor, by := applied.Floor(keys)
	if serial >= floor || rollback {
		return nil
	}
	return sigErr(codes.SignatureReplay, by, "serial %d is lower than serial %d, applied on this box under key %s; only an explicit rollback goes back",
		serial, floor, by)
}

// Sentinels for errors.Is: ErrSignature matches every *SignatureError, each of the
// others the *SignatureError of its code.
var (
	ErrSignature           = errors.New("bundle: signature refused")
	ErrSignatureMissing    = errors.New("bundle: " + string(codes.SignatureMissing))
	ErrSignatureInvalid    = errors.New("bundle: " + string(codes.SignatureInvalid))
	ErrSignatureUnknownKey = errors.New("bundle: " + string(codes.SignatureUnknownKey))
	ErrSignatureExpired    = errors.New("bundle: " + string(codes.SignatureExpired))
	ErrSignatureReplay     = errors.New("bundle: " + string(codes.SignatureReplay))
)

var signatureSentinels = map[codes.Code]error{
	codes.SignatureMissing:    ErrSignatureMissing,
	codes.SignatureInvalid:    ErrSignatureInvalid,
	codes.SignatureUnknownKey: ErrSignatureUnknownKey,
	codes.SignatureExpired:    ErrSignatureExpired,
	codes.SignatureReplay:     ErrSignatureReplay,
}

// SignatureError is a refused signature. Its code is one of codes.Signatures; its
// detail names keys, shas, env_ids, serials and times, nothing secret.
type SignatureError struct {
	// KeyID is the key the signature names, "" when none could be read.
	KeyID KeyID
	// Detail says what is wrong.
	Detail string
	code   codes.Code
}

func sigErr(c codes.Code, id KeyID, format string, args ...any) *SignatureError {
	return &SignatureError{KeyID: id, Detail: fmt.Sprintf(format, args...), code: c}
}

// Error returns "signature refused: CODE: detail".
func (e *SignatureError) Error() string {
	return "signature refused: " + string(e.Code()) + ": " + e.Detail
}

// Code returns the stable code, so that deployd.CodeOf finds it.
func (e *SignatureError) Code() codes.Code {
	if e.code == "" {
		return codes.SignatureInvalid
	}
	return e.code
}

// Is reports whether target is ErrSignature or the sentinel of e's code.
func (e *SignatureError) Is(target error) bool {
	return target == ErrSignature || target == signatureSentinels[e.Code()]
}

// Refusal returns the refusal the agent reports and `verify` lists, so that a
// signature refusal travels as a *RefusedError like every other refusal before the
// lease: &RefusedError{SHA: sha, Refusals: []Refusal{e.Refusal()}}.
func (e *SignatureError) Refusal() Refusal { return Refusal{Code: e.Code(), Detail: e.Detail} }

var (
	_ error                          = (*SignatureError)(nil)
	_ interface{ Code() codes.Code } = (*SignatureError)(nil)
	_ interface{ Is(error) bool }    = (*SignatureError)(nil)
)
