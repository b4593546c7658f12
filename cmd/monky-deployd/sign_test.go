package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// testSigningKey writes a fixed private key (seed n, n, …) as keygen would, so that
// signatures, and the goldens made of them, are the same on every run.
func testSigningKey(t *testing.T, n byte) (path string, pub bundle.PublicKey) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{n}, ed25519.SeedSize))
	data, err := bundle.MarshalPrivateKey(priv)
	require.NoError(t, err)
	path = filepath.Join(t.TempDir(), "renderer.key")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	pub, err = bundle.NewPublicKey(priv.Public().(ed25519.PublicKey))
	require.NoError(t, err)
	return path, pub
}

// secretsOf returns what of a private key file must never be printed: its PEM body
// lines and its seed.
func secretsOf(t *testing.T, keyPath string) []string {
	t.Helper()
	data := readFile(t, keyPath)
	priv, err := bundle.ParsePrivateKey(data)
	require.NoError(t, err)
	out := []string{base64.StdEncoding.EncodeToString(priv.Seed()), base64.StdEncoding.EncodeToString(priv.Seed())[:16]}
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

func assertNoSecret(t *testing.T, r mainResult, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		assert.NotContains(t, r.Stdout, s, "the private key reached stdout")
		assert.NotContains(t, r.Stderr, s, "the private key reached stderr")
	}
}

// renderDir writes the sample application as a renderer leaves it: its files and the
// manifest.json that lists them.
func renderDir(t *testing.T, envID string, serial int64) string {
	t.Helper()
	spec := faketenancy.SampleApp(envID, serial)
	dir := filepath.Join(t.TempDir(), "rendered")
	for name, body := range spec.Files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	m := bundle.Manifest{Schema: 1, EnvID: envID, Serial: serial, ComposeFiles: []string{"compose.yaml"},
		Files: slices.Sorted(maps.Keys(spec.Files)), Vars: spec.Vars, Secrets: map[string]bundle.SecretRef{}}
	for k, v := range spec.Secrets {
		m.Secrets[k] = bundle.SecretRef{Path: v.Path, Key: v.Key}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, bundle.ManifestName), append(data, '\n'), 0o644))
	return dir
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "renderer.key")
	r := runMainExit(t, 0, nil, "keygen", "--out", key)
	assert.Empty(t, r.Stderr)

	st, err := os.Stat(key)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	st, err = os.Stat(key + ".pub")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	pubText := readFile(t, key+".pub")
	pub, err := bundle.ParsePublicKey(string(pubText))
	require.NoError(t, err)
	assert.Equal(t, pub.String()+"\n", string(pubText))
	data := readFile(t, key)
	priv, err := bundle.ParsePrivateKey(data)
	require.NoError(t, err)
	assert.Equal(t, pub.Key, priv.Public(), "the .pub is the private key's public half")
	assert.Equal(t, "wrote the private key "+key+" (mode 0600: keep it secret) and the public key "+key+".pub\n"+
		"key_id "+string(pub.ID)+"\n"+pub.String()+"\n", r.Stdout)
	assertNoSecret(t, r, secretsOf(t, key))

	// Never over an existing key, private or public.
	r = runMain(t, nil, "keygen", "--out", key)
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stderr, "exists; a key is never overwritten")
	assert.Equal(t, data, readFile(t, key))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.pub"), nil, 0o644))
	r = runMain(t, nil, "keygen", "--out", filepath.Join(dir, "other"))
	assert.Equal(t, 1, r.Code)
	assert.NoFileExists(t, filepath.Join(dir, "other"))

	// Two runs, two keys.
	runMainExit(t, 0, nil, "keygen", "--out", filepath.Join(dir, "second"))
	assert.NotEqual(t, pubText, readFile(t, filepath.Join(dir, "second.pub")))
}

func TestPack(t *testing.T) {
	dir := renderDir(t, "env-dev-01", 7)
	out := t.TempDir()
	a, b := filepath.Join(out, "a.tar.gz"), filepath.Join(out, "b.tar.gz")
	r := runMainExit(t, 0, nil, "pack", "--out", a, dir)
	assert.Empty(t, r.Stderr)
	data := readFile(t, a)
	assert.Equal(t, []byte{0x1f, 0x8b}, data[:2], ".tar.gz: gzip")
	sha := bundleSHA(t, data)
	assert.Equal(t, "packed "+sha+" (env-dev-01 serial 7, 3 files, "+sizeOf(t, dir)+" bytes) to "+a+"\n", r.Stdout)
	golden.Assert(t, "golden/pack.txt", []byte(strings.ReplaceAll(r.Stdout, out, "$OUT")))

	// Reproducible: the same directory, touched and re-moded, packs to the same bytes.
	require.NoError(t, os.Chmod(filepath.Join(dir, "compose.yaml"), 0o600))
	require.NoError(t, os.Chtimes(filepath.Join(dir, "config", "app.toml"), time0, time0))
	r = runMainExit(t, 0, nil, "pack", "--out", b, "--json", dir)
	assert.Equal(t, data, readFile(t, b))
	var j map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &j))
	assert.Equal(t, map[string]any{"sha": sha, "env_id": "env-dev-01", "serial": float64(7), "files": float64(3),
		"size": j["size"], "out": b}, j)

	// The coreutils line in the directory gives the same sha.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sh", "-c", `find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`)
		cmd.Dir = dir
		line, err := cmd.Output()
		require.NoError(t, err)
		assert.Equal(t, sha, strings.Fields(string(line))[0])
	}

	// A plain tar for any other name; verify accepts what pack wrote.
	plain := filepath.Join(out, "bundle.tar")
	require.Equal(t, 0, runMain(t, nil, "pack", "--out", plain, dir).Code)
	pdata := readFile(t, plain)
	assert.Equal(t, "ustar", string(pdata[257:262]))
	assert.Equal(t, sha, bundleSHA(t, pdata))
	r = runMain(t, nil, "verify", "--env", "env-dev-01", "--sha", sha, plain)
	assert.Equal(t, 0, r.Code, r.Stdout+r.Stderr)
	assert.Equal(t, "accepted "+sha+"\n", r.Stdout)
}

var time0 = time.Unix(0, 0)

func sizeOf(t *testing.T, dir string) string {
	t.Helper()
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			info, err := d.Info()
			require.NoError(t, err)
			n += info.Size()
		}
		return nil
	}))
	return strconv.FormatInt(n, 10)
}

// bundleSHA recomputes the bundle sha of bundle bytes with the formula of
// docs/BUNDLE.md, as `sha256sum` would, independently of the bundle package: with
// faketenancy.SHA, the fake's own code.
func bundleSHA(t *testing.T, data []byte) string {
	t.Helper()
	sha, err := faketenancy.SHA(bytes.NewReader(data))
	require.NoError(t, err)
	return sha
}

func TestPackRefusals(t *testing.T) {
	t.Run("symlink", func(t *testing.T) {
		dir := renderDir(t, "env-dev-01", 7)
		require.NoError(t, os.Symlink("/etc/shadow", filepath.Join(dir, "config", "shadow")))
		out := filepath.Join(t.TempDir(), "b.tar.gz")
		r := runMain(t, nil, "pack", "--out", out, dir)
		assert.Equal(t, 1, r.Code)
		assert.Empty(t, r.Stdout)
		assert.Equal(t, "monky-deployd pack: refused\n"+
			`MANIFEST_PATHS: "config/shadow" is a symlink; a bundle holds only regular files and directories`+"\n", r.Stderr)
		assert.NoFileExists(t, out, "no partial bundle")
		entries, err := os.ReadDir(filepath.Dir(out))
		require.NoError(t, err)
		assert.Empty(t, entries, "no temporary file left")
	})
	t.Run("manifest does not list a file", func(t *testing.T) {
		dir := renderDir(t, "env-dev-01", 7)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644))
		r := runMain(t, nil, "pack", "--out", filepath.Join(t.TempDir(), "b.tar"), dir)
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stderr, `MANIFEST_PATHS: "stray.txt" is in the directory but not in files`)
	})
	t.Run("no manifest", func(t *testing.T) {
		dir := renderDir(t, "env-dev-01", 7)
		require.NoError(t, os.Remove(filepath.Join(dir, bundle.ManifestName)))
		r := runMain(t, nil, "pack", "--out", filepath.Join(t.TempDir(), "b.tar"), dir)
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stderr, "BUNDLE_MALFORMED: the directory has no manifest.json at its root")
	})
	t.Run("unwritable output", func(t *testing.T) {
		r := runMain(t, nil, "pack", "--out", filepath.Join(t.TempDir(), "no", "such", "dir", "b.tar"), renderDir(t, "env-dev-01", 7))
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stderr, "no such file or directory")
	})
}

func TestSign(t *testing.T) {
	key, pub := testSigningKey(t, 1)
	secrets := secretsOf(t, key)
	bundlePath := copyFixture(t, "good.tar.gz")
	sha := fixtureSHA(t, "good.tar.gz")

	r := runMainExit(t, 0, nil, "sign", "--key", key, bundlePath)
	assertNoSecret(t, r, secrets)
	assert.Empty(t, r.Stderr)
	assert.Equal(t, "signed "+sha+" (env-dev-01 serial 7) with key "+string(pub.ID)+", expires never, to "+bundlePath+".sig\n", r.Stdout)
	sig := readFile(t, bundlePath+".sig")
	golden.Assert(t, "golden/good.tar.gz.sig", sig)
	st, err := os.Stat(bundlePath + ".sig")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	keys, err := bundle.NewKeyRing(pub)
	require.NoError(t, err)
	_, err = bundle.CheckSignature(sig, keys, bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 7}, time.Now())
	require.NoError(t, err)

	t.Run("expires, out, json", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "x.sig")
		r := runMainExit(t, 0, nil, "sign", "--key", key, "--expires", "2100-01-02T03:04:05+01:00", "--out", out, "--json", bundlePath)
		assert.JSONEq(t, `{"sha":"`+sha+`","env_id":"env-dev-01","serial":7,"key_id":"`+string(pub.ID)+`","expires":"2100-01-02T02:04:05Z","out":"`+out+`"}`, r.Stdout)
		sig := readFile(t, out)
		assert.Contains(t, string(sig), "\nexpires 2100-01-02T02:04:05Z\n")

		runMainExit(t, 0, nil, "sign", "--key", key, "--expires", "720h", "--out", out, bundlePath)
		parsed, err := bundle.ParseSignature(readFile(t, out))
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(720*time.Hour), parsed.Expires, time.Minute)
	})
	t.Run("another env", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "x.sig")
		r := runMain(t, nil, "sign", "--key", key, "--env", "env-prod-01", "--out", out, bundlePath)
		assert.Equal(t, 1, r.Code)
		assert.Equal(t, "monky-deployd sign: the bundle is for env-dev-01, not env-prod-01; not signed\n", r.Stderr)
		assert.NoFileExists(t, out)
	})
	t.Run("not a bundle", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "x.sig")
		r := runMain(t, nil, "sign", "--key", key, "--out", out, fixture(t, "not-a-bundle.txt"))
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stderr, "monky-deployd sign: refused\nBUNDLE_MALFORMED: not a tar archive")
		assert.NoFileExists(t, out)
	})
	t.Run("a key readable by others is used, with a warning", func(t *testing.T) {
		loose := filepath.Join(t.TempDir(), "loose.key")
		data := readFile(t, key)
		require.NoError(t, os.WriteFile(loose, data, 0o644))
		r := runMain(t, nil, "sign", "--key", loose, "--out", filepath.Join(t.TempDir(), "x.sig"), bundlePath)
		assert.Equal(t, 0, r.Code)
		assert.Contains(t, r.Stderr, "is readable by others (mode 0644); keep a private key 0600")
		assertNoSecret(t, r, secrets)
	})
	t.Run("bad keys", func(t *testing.T) {
		dir := t.TempDir()
		pubFile := filepath.Join(dir, "renderer.key.pub")
		require.NoError(t, os.WriteFile(pubFile, []byte(pub.String()+"\n"), 0o600))
		corrupt := filepath.Join(dir, "corrupt.key")
		require.NoError(t, os.WriteFile(corrupt, bytes.Replace(readFile(t, key), []byte("MC4C"), []byte("MD4C"), 1), 0o600))
		for name, tt := range map[string]struct {
			path string
			code int
			want string
		}{
			"the public key":  {pubFile, 1, "not a PEM private key"},
			"a corrupt key":   {corrupt, 1, "not a valid PKCS #8 key"},
			"a missing file":  {filepath.Join(dir, "nope"), exitUsage, "no such file"},
			"the bundle file": {bundlePath, 1, "not a PEM private key"},
		} {
			t.Run(name, func(t *testing.T) {
				r := runMain(t, nil, "sign", "--key", tt.path, "--out", filepath.Join(dir, "x.sig"), bundlePath)
				assert.Equal(t, tt.code, r.Code)
				assert.Contains(t, r.Stderr, tt.want)
				assert.Empty(t, r.Stdout)
				assertNoSecret(t, r, secrets)
				assert.NotContains(t, r.Stderr, pub.String()[8:])
			})
		}
	})
}

// copyFixture copies a fixture bundle into a temporary directory, so that its .sig
// goes there.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	data := readFile(t, fixture(t, name))
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// TestVerifySignature: verify --key checks the signature as a box with those keys
// would, and says so in "signature" (JSON) or a line (text), additively.
func TestVerifySignature(t *testing.T) {
	key1, pub1 := testSigningKey(t, 1)
	key2, pub2 := testSigningKey(t, 2)
	_, pub3 := testSigningKey(t, 3)
	good := copyFixture(t, "good.tar.gz")
	sha := fixtureSHA(t, "good.tar.gz")
	signed := func(t *testing.T, key string, extra ...string) string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "b.sig")
		r := runMainExit(t, 0, nil, append(append([]string{"sign", "--key", key, "--out", out}, extra...), good)...)
		if slices.Contains(extra, "2001-01-01T00:00:00Z") {
			assert.Contains(t, r.Stderr, "is in the past: every box refuses this signature (SIGNATURE_EXPIRED)")
		} else {
			assert.Empty(t, r.Stderr)
		}
		return out
	}
	pubFile := filepath.Join(t.TempDir(), "renderer.pub")
	require.NoError(t, os.WriteFile(pubFile, []byte(pub1.String()+"\n"), 0o644))
	sigNever := signed(t, key1)
	sig2100 := signed(t, key1, "--expires", "2100-01-01T00:00:00Z")
	sigKey2 := signed(t, key2)
	sigExpired := signed(t, key1, "--expires", "2001-01-01T00:00:00Z")
	truncated := filepath.Join(t.TempDir(), "t.sig")
	data := readFile(t, sigNever)
	require.NoError(t, os.WriteFile(truncated, data[:len(data)-30], 0o644))
	otherSerial := filepath.Join(t.TempDir(), "o.sig")
	otherSig, err := bundle.Sign(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)), bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 6}, bundle.SignOptions{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(otherSerial, otherSig, 0o644))

	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
		lines  []string
		// JSON runs: the refusal codes and the verdict.
		refusals []string
		valid    bool
		sigCode  string
		keyID    bundle.KeyID
	}{
		{name: "signed, json", args: []string{"--key", pub1.String(), "--sig", sig2100, "--json"}, golden: "verify-signed.json", valid: true, keyID: pub1.ID},
		{name: "signed, human", args: []string{"--key", pub1.String(), "--sig", sig2100},
			lines: []string{"accepted " + sha, "signature: valid, key " + string(pub1.ID) + ", expires 2100-01-01T00:00:00Z"}},
		{name: "no expiry, key from a file", args: []string{"--key", pubFile, "--sig", sigNever},
			lines: []string{"accepted " + sha, "signature: valid, key " + string(pub1.ID) + ", no expiry"}},
		{name: "rotation: the new key among two", args: []string{"--key", pub1.String(), "--key", pub2.String(), "--sig", sigKey2, "--json"}, valid: true, keyID: pub2.ID},
		{name: "unsigned", args: []string{"--key", pub1.String(), "--json"}, code: 1, golden: "verify-unsigned.json",
			refusals: []string{"SIGNATURE_MISSING"}, sigCode: "SIGNATURE_MISSING"},
		{name: "unsigned, human", args: []string{"--key", pub1.String()}, code: 1, golden: "verify-unsigned.txt"},
		{name: "unknown key", args: []string{"--key", pub3.String(), "--sig", sigNever, "--json"}, code: 1,
			refusals: []string{"SIGNATURE_UNKNOWN_KEY"}, sigCode: "SIGNATURE_UNKNOWN_KEY", keyID: pub1.ID},
		{name: "removed key", args: []string{"--key", pub2.String(), "--sig", sigNever}, code: 1,
			lines: []string{"refused " + sha, "SIGNATURE_UNKNOWN_KEY: key " + string(pub1.ID) + " is not trusted by this box (trusted: " + string(pub2.ID) + ")"}},
		{name: "expired", args: []string{"--key", pub1.String(), "--sig", sigExpired, "--json"}, code: 1,
			refusals: []string{"SIGNATURE_EXPIRED"}, sigCode: "SIGNATURE_EXPIRED", keyID: pub1.ID},
		{name: "truncated", args: []string{"--key", pub1.String(), "--sig", truncated, "--json"}, code: 1,
			refusals: []string{"SIGNATURE_INVALID"}, sigCode: "SIGNATURE_INVALID"},
		{name: "another serial", args: []string{"--key", pub1.String(), "--sig", otherSerial}, code: 1, golden: "verify-signature-other-serial.txt"},
		{name: "another env: both refusals", args: []string{"--env", "env-dev-02", "--key", pub1.String(), "--sig", sigNever, "--json"}, code: 1,
			golden: "verify-signature-other-env.json", refusals: []string{"ENV_MISMATCH", "SIGNATURE_INVALID"}, sigCode: "SIGNATURE_INVALID", keyID: pub1.ID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !slices.Contains(args, "--env") {
				args = append([]string{"--env", "env-dev-01"}, args...)
			}
			r := runMain(t, nil, append(append([]string{"verify"}, args...), good)...)
			assert.Equal(t, tc.code, r.Code, "stdout: %s\nstderr: %s", r.Stdout, r.Stderr)
			assert.Empty(t, r.Stderr)
			if tc.golden != "" {
				golden.Assert(t, "golden/"+tc.golden, []byte(r.Stdout))
			}
			if tc.lines != nil {
				assert.Equal(t, strings.Join(tc.lines, "\n")+"\n", r.Stdout)
			}
			if !slices.Contains(args, "--json") {
				return
			}
			// Additive: sha, refusals and warnings as before, and signature.
			dec := json.NewDecoder(strings.NewReader(r.Stdout))
			dec.DisallowUnknownFields()
			var v struct {
				SHA       string           `json:"sha"`
				Refusals  []bundle.Refusal `json:"refusals"`
				Warnings  []string         `json:"warnings"`
				Signature *struct {
					Valid   *bool   `json:"valid"`
					KeyID   *string `json:"key_id"`
					Expires *string `json:"expires"`
					Code    *string `json:"code"`
					Detail  *string `json:"detail"`
				} `json:"signature"`
			}
			require.NoError(t, dec.Decode(&v), r.Stdout)
			assert.Equal(t, sha, v.SHA)
			require.NotNil(t, v.Refusals)
			require.NotNil(t, v.Warnings)
			var got []string
			for _, rf := range v.Refusals {
				got = append(got, string(rf.Code))
			}
			assert.Equal(t, tc.refusals, got)
			s := v.Signature
			require.NotNil(t, s)
			require.True(t, s.Valid != nil && s.KeyID != nil && s.Expires != nil && s.Code != nil && s.Detail != nil, "every field, always: %s", r.Stdout)
			assert.Equal(t, tc.valid, *s.Valid)
			assert.Equal(t, tc.sigCode, *s.Code)
			assert.Equal(t, string(tc.keyID), *s.KeyID)
			if tc.valid {
				assert.Empty(t, *s.Detail)
			} else {
				assert.NotEmpty(t, *s.Detail)
			}
		})
	}

	t.Run("without --key, the output is what it was", func(t *testing.T) {
		r := runMainExit(t, 0, nil, "verify", "--env", "env-dev-01", "--json", good)
		golden.Assert(t, "golden/verify-good.json", []byte(r.Stdout))
	})
	t.Run("not a bundle: not checked", func(t *testing.T) {
		r := runMain(t, nil, "verify", "--env", "env-dev-01", "--key", pub1.String(), "--sig", sigNever, fixture(t, "not-a-bundle.txt"))
		assert.Equal(t, 1, r.Code)
		assert.Contains(t, r.Stdout, "signature: not checked: the bundle has no sha or no serial to check it against\n")
	})
}

// TestBundleDocRecipe runs the shell recipe of docs/BUNDLE.md ("A reproducible recipe")
// with the shipped binary, as a renderer's CI would: keygen, pack, sign, verify.
func TestBundleDocRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	doc := readFile(t, filepath.Join("..", "..", "docs", "BUNDLE.md"))
	m := regexp.MustCompile("(?s)### A reproducible recipe\n.*?```sh\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, m, "docs/BUNDLE.md has the recipe")
	recipe := string(m[1])
	bin := agentBinary(t)
	work := t.TempDir()
	rendered := renderDir(t, "env-dev-01", 7)
	require.NoError(t, os.Rename(rendered, filepath.Join(work, "rendered")))
	binDir := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(binDir, "monky-deployd")))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", recipe)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "accepted ")
	assert.Contains(t, string(out), "signature: valid, key ")
	sha := bundleSHA(t, readFile(t, filepath.Join(work, "bundle.tar.gz")))
	assert.Contains(t, string(out), sha, "the recipe's sha lines agree")
	assert.Equal(t, 4, strings.Count(string(out), sha), "pack, the coreutils line, sign and verify print the same sha:\n%s", out)
	assertNoSecret(t, mainResult{Stdout: string(out)}, secretsOf(t, filepath.Join(work, "renderer.key")))
}

// fixtureSHAOf is bundleSHA of the bundle file at path.
func fixtureSHAOf(t *testing.T, path string) string {
	t.Helper()
	return bundleSHA(t, readFile(t, path))
}
