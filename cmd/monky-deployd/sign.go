package main

// The renderer's subcommands (pack, sign, keygen) and the signature half of verify
// (docs/BUNDLE.md, "Signatures").

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// bundleFailed prints a bundle command's error to stderr: the refusals of a
// *bundle.RefusedError, one per line, or the error itself. It returns ExitFailed.
func (c *cli) bundleFailed(cmd string, err error) int {
	var b strings.Builder
	if refused := (*bundle.RefusedError)(nil); errors.As(err, &refused) {
		fmt.Fprintf(&b, "monky-deployd %s: refused\n", cmd)
		writeRefusals(&b, refused.Refusals)
	} else {
		fmt.Fprintf(&b, "monky-deployd %s: %v\n", cmd, err)
	}
	_, _ = io.WriteString(c.stderr, b.String())
	return deployd.ExitFailed
}

// printJSON writes v as one line of JSON.
func (c *cli) printJSON(v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		c.log.Error("could not encode the output", "err", err)
		return deployd.ExitFailed
	}
	return c.output(string(data) + "\n")
}

// packJSON is what `pack --json` prints.
type packJSON struct {
	SHA    string `json:"sha"`
	EnvID  string `json:"env_id"`
	Serial int64  `json:"serial"`
	Files  int    `json:"files"`
	Size   int64  `json:"size"`
	Out    string `json:"out"`
}

// pack builds a bundle from a rendered directory that holds its manifest.json.
func (c *cli) pack(ctx context.Context, args []string) int {
	fs := c.flags("pack")
	out := fs.String("out", "", "the bundle to write (required); gzip-compressed when it ends in .gz or .tgz")
	asJSON := fs.Bool("json", false, `print {"sha":…,"env_id":…,"serial":…,"files":…,"size":…,"out":…}`)
	if code, ok := c.parse(fs, args, 1, "out"); !ok {
		return code
	}
	dir := fs.Arg(0)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd pack: %s is not a directory\n", dir)
		return exitUsage
	}
	opt := bundle.PackOptions{Gzip: strings.HasSuffix(*out, ".gz") || strings.HasSuffix(*out, ".tgz")}
	var res *bundle.PackResult
	err := fsutil.WriteAtomic(*out, 0o644, func(w io.Writer) error {
		var err error
		res, err = bundle.PackDir(ctx, w, dir, opt)
		return err
	})
	if err != nil {
		return c.bundleFailed("pack", err)
	}
	if *asJSON {
		return c.printJSON(packJSON{SHA: res.SHA, EnvID: res.Manifest.EnvID, Serial: res.Manifest.Serial,
			Files: res.Files, Size: res.Size, Out: *out})
	}
	return c.output(fmt.Sprintf("packed %s (%s serial %d, %d files, %d bytes) to %s\n",
		res.SHA, res.Manifest.EnvID, res.Manifest.Serial, res.Files, res.Size, *out))
}

// signJSON is what `sign --json` prints.
type signJSON struct {
	SHA     string       `json:"sha"`
	EnvID   string       `json:"env_id"`
	Serial  int64        `json:"serial"`
	KeyID   bundle.KeyID `json:"key_id"`
	Expires string       `json:"expires"`
	Out     string       `json:"out"`
}

// parseExpires reads --expires: "" (never), a duration from now ("720h") or an RFC 3339
// time.
func parseExpires(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, errors.New("a duration must be positive")
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("give a duration (720h) or an RFC 3339 time (2026-12-31T00:00:00Z)")
	}
	return t, nil
}

// sign signs a bundle with the renderer's private key.
func (c *cli) sign(ctx context.Context, args []string) int {
	fs := c.flags("sign")
	keyPath := fs.String("key", "", "the private key file (PKCS #8 PEM, as keygen writes it; required)")
	expiresFlag := fs.String("expires", "", "when the signature stops being valid: a duration (720h) or an RFC 3339 time; default never")
	env := fs.String("env", "", "refuse to sign unless the bundle is for this env_id")
	out := fs.String("out", "", "the signature file to write (default: BUNDLE.sig)")
	asJSON := fs.Bool("json", false, `print {"sha":…,"env_id":…,"serial":…,"key_id":…,"expires":…,"out":…}`)
	if code, ok := c.parse(fs, args, 1, "key"); !ok {
		return code
	}
	expires, err := parseExpires(*expiresFlag, time.Now())
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: --expires: %v\n", err)
		return exitUsage
	}
	if !expires.IsZero() && expires.Before(time.Now()) {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: warning: --expires %s is in the past: every box refuses this signature (SIGNATURE_EXPIRED)\n", *expiresFlag)
	}
	key, code := c.readPrivateKey(*keyPath)
	if key == nil {
		return code
	}
	bundlePath := fs.Arg(0)
	sigPath := cmp.Or(*out, bundlePath+".sig")
	f, err := os.Open(bundlePath)
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: %v\n", err)
		return exitUsage
	}
	st, err := bundle.ReadStatement(ctx, f, bundle.Limits{})
	_ = f.Close() // read-only
	switch {
	case err != nil:
		return c.bundleFailed("sign", err)
	case *env != "" && st.EnvID != *env:
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: the bundle is for %s, not %s; not signed\n", st.EnvID, *env)
		return deployd.ExitFailed
	}
	sig, err := bundle.Sign(key, st, bundle.SignOptions{Expires: expires})
	if err == nil {
		err = fsutil.WriteAtomic(sigPath, 0o644, func(w io.Writer) error { _, err := w.Write(sig); return err })
	}
	if err != nil {
		return c.bundleFailed("sign", err)
	}
	s, err := bundle.ParseSignature(sig)
	if err != nil { // Sign wrote it: never
		return c.bundleFailed("sign", err)
	}
	exp := "never"
	if !s.Expires.IsZero() {
		exp = s.Expires.Format(time.RFC3339)
	}
	if *asJSON {
		j := signJSON{SHA: st.SHA, EnvID: st.EnvID, Serial: st.Serial, KeyID: s.KeyID, Out: sigPath}
		if !s.Expires.IsZero() {
			j.Expires = exp
		}
		return c.printJSON(j)
	}
	return c.output(fmt.Sprintf("signed %s (%s serial %d) with key %s, expires %s, to %s\n",
		st.SHA, st.EnvID, st.Serial, s.KeyID, exp, sigPath))
}

// readPrivateKey reads the private key file; nothing of it ever reaches the output.
func (c *cli) readPrivateKey(path string) (ed25519.PrivateKey, int) {
	f, err := os.Open(path)
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: %v\n", err)
		return nil, exitUsage
	}
	defer func() { _ = f.Close() }() // read-only
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: warning: %s is readable by others (mode %04o); keep a private key 0600\n", path, st.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: reading the key: %v\n", err)
		return nil, deployd.ExitFailed
	}
	key, err := bundle.ParsePrivateKey(data)
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd sign: %s: %v\n", path, err)
		return nil, deployd.ExitFailed
	}
	return key, 0
}

// keygen writes a new key pair: the private key (0600) and its .pub.
func (c *cli) keygen(args []string) int {
	fs := c.flags("keygen")
	out := fs.String("out", "", "the private key file to write (required); the public key goes to FILE.pub")
	if code, ok := c.parse(fs, args, 0, "out"); !ok {
		return code
	}
	pubPath := *out + ".pub"
	for _, p := range []string{*out, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			_, _ = fmt.Fprintf(c.stderr, "monky-deployd keygen: %s exists; a key is never overwritten\n", p)
			return deployd.ExitFailed
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd keygen: %v\n", err)
		return deployd.ExitFailed
	}
	pk, err := bundle.NewPublicKey(pub)
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd keygen: %v\n", err)
		return deployd.ExitFailed
	}
	pemData, err := bundle.MarshalPrivateKey(priv)
	if err == nil {
		err = writeNew(*out, 0o600, pemData)
	}
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd keygen: %v\n", err)
		return deployd.ExitFailed
	}
	if err := writeNew(pubPath, 0o644, []byte(pk.String()+"\n")); err != nil {
		_ = os.Remove(*out) // no private key without its public half
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd keygen: %v\n", err)
		return deployd.ExitFailed
	}
	return c.output(fmt.Sprintf("wrote the private key %s (mode 0600: keep it secret) and the public key %s\nkey_id %s\n%s\n",
		*out, pubPath, pk.ID, pk.String()))
}

// writeNew creates path (never over an existing file) with mode, whatever the umask.
func writeNew(path string, mode os.FileMode, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// keysFlag is verify's repeatable --key: a public key (ed25519:…) or a file holding one.
type keysFlag []string

func (k *keysFlag) String() string { return strings.Join(*k, ",") }

func (k *keysFlag) Set(s string) error {
	*k = append(*k, s)
	return nil
}

// keyRing reads the --key values; an error never repeats a key's text.
func (k keysFlag) keyRing() (bundle.KeyRing, error) {
	texts := make([]string, 0, len(k))
	for _, v := range k {
		if strings.HasPrefix(v, bundle.KeyAlgorithm+":") {
			texts = append(texts, v)
			continue
		}
		data, err := os.ReadFile(v)
		if err != nil {
			return bundle.KeyRing{}, err
		}
		pk, err := bundle.ParsePublicKey(string(data))
		if err != nil {
			return bundle.KeyRing{}, fmt.Errorf("%s: %w", v, err)
		}
		texts = append(texts, pk.String())
	}
	return bundle.ParseKeyRing(texts)
}

// signatureVerdict is the "signature" object of `verify --json`, present with --key.
type signatureVerdict struct {
	// Valid is true when the signature lets a box with these keys run the bundle.
	Valid bool `json:"valid"`
	// KeyID is the key the signature names, "" when none could be read.
	KeyID bundle.KeyID `json:"key_id"`
	// Expires is the signature's expiry (RFC 3339), "" when it has none.
	Expires string `json:"expires"`
	// Code is the refusal's code, "" when valid or not checked.
	Code codes.Code `json:"code"`
	// Detail says why it was refused or not checked; "" when valid.
	Detail string `json:"detail"`
}

// checkSignature checks the bundle's signature file against keys, as a box that trusts
// them would before its lease (without the replay ratchet: verify has no box state).
// A refusal is added to out.Refusals; a missing file named by --sig is a usage error.
func (c *cli) checkSignature(keys bundle.KeyRing, sigPath string, explicit bool, env string, res *bundle.Result, out *verifyJSON) int {
	v := &signatureVerdict{}
	out.Signature = v
	sig, err := readSignature(sigPath)
	switch {
	case errors.Is(err, os.ErrNotExist) && explicit:
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd verify: %v\n", err)
		return exitUsage
	case errors.Is(err, os.ErrNotExist):
		sig = nil // no signature beside the bundle: SIGNATURE_MISSING below
	case err != nil:
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd verify: %v\n", err)
		return deployd.ExitFailed
	}
	if s, err := bundle.ParseSignature(sig); err == nil {
		v.KeyID = s.KeyID
		if !s.Expires.IsZero() {
			v.Expires = s.Expires.Format(time.RFC3339)
		}
	}
	if res == nil || res.SHA == "" || res.Manifest.Serial < 1 {
		v.Detail = "not checked: the bundle has no sha or no serial to check it against"
		return 0
	}
	id, err := bundle.CheckSignature(sig, keys, bundle.Statement{SHA: res.SHA, EnvID: env, Serial: res.Manifest.Serial}, time.Now())
	var se *bundle.SignatureError
	switch {
	case errors.As(err, &se):
		v.KeyID, v.Code, v.Detail = se.KeyID, se.Code(), se.Detail
		out.Refusals = append(out.Refusals, se.Refusal())
		slices.SortStableFunc(out.Refusals, func(a, b bundle.Refusal) int {
			return cmp.Or(cmp.Compare(a.Code, b.Code), cmp.Compare(a.Detail, b.Detail))
		})
	case err != nil:
		v.Detail = "not checked: " + err.Error()
	default:
		v.Valid, v.KeyID = true, id
	}
	return 0
}

// readSignature reads a signature file, at most one byte more than a signature may
// hold (ParseSignature refuses that).
func readSignature(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	return io.ReadAll(io.LimitReader(f, bundle.MaxSignatureSize+1))
}

// signatureLine is the human line of the verdict, "" when a refusal line says it.
func signatureLine(v *signatureVerdict) string {
	switch {
	case v.Valid && v.Expires != "":
		return fmt.Sprintf("signature: valid, key %s, expires %s\n", v.KeyID, v.Expires)
	case v.Valid:
		return fmt.Sprintf("signature: valid, key %s, no expiry\n", v.KeyID)
	case v.Code == "":
		return "signature: " + v.Detail + "\n"
	}
	return ""
}
