package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// tickRE finds the tick's own log line and its code attribute ("" when the tick
// did its job).
var tickRE = regexp.MustCompile(`(?m)^.*msg="tick (?:done|failed|ended on a temporary condition[^"]*)".* code=(\S*)(?: .*)?$`)

// signedTickCode returns the code of the tick line in stderr.
func tickCode(t testing.TB, stderr string) string {
	t.Helper()
	m := tickRE.FindStringSubmatch(stderr)
	require.NotNil(t, m, "no tick line in:\n%s", stderr)
	return m[1]
}

// sigBox is a box that trusts signing keys, driven through the real binary: the keys
// made by `monky-deployd keygen`, the signatures by `monky-deployd sign`.
type sigBox struct {
	*box
	dir string
}

// keygen runs `monky-deployd keygen --out DIR/name` and returns the private key's
// path and its public key, read back from the .pub.
func (s *sigBox) keygen(name string) (string, bundle.PublicKey) {
	s.T.Helper()
	priv := filepath.Join(s.dir, name)
	res := s.runExit(0, []string{"keygen", "--out", priv})
	pk, err := bundle.ParsePublicKey(string(readFile(s.T, priv+".pub")))
	require.NoError(s.T, err)
	assert.Contains(s.T, res.Stdout, "key_id "+string(pk.ID))
	return priv, pk
}

// publish writes the bundle of spec to DIR/name and publishes it (desired); it
// returns the file and its sha.
func (s *sigBox) publish(name string, spec faketenancy.BundleSpec) (string, string) {
	s.T.Helper()
	data := testbox.Tarball(s.T, spec, true)
	file := filepath.Join(s.dir, name)
	require.NoError(s.T, os.WriteFile(file, data, 0o644))
	sha, serial, err := s.Stack.Tenancy.PublishBundle(s.Env, data)
	require.NoError(s.T, err)
	require.Equal(s.T, spec.Serial, serial)
	return file, sha
}

// sign runs `monky-deployd sign --key KEY --env ENV --json FILE`, checks what it says,
// and publishes the signature it wrote to the fake tenancy for sha.
func (s *sigBox) sign(file, sha, key string, id bundle.KeyID) {
	s.T.Helper()
	out := file + "." + filepath.Base(key) + ".sig"
	res := s.runExit(0, []string{"sign", "--key", key, "--env", s.Env, "--out", out, "--json", file})
	var got signJSON
	require.NoError(s.T, json.Unmarshal([]byte(res.Stdout), &got), res.Stdout)
	assert.Equal(s.T, sha, got.SHA, "sign and tenancy name the bundle by the same sha")
	assert.Equal(s.T, s.Env, got.EnvID)
	assert.Equal(s.T, id, got.KeyID)
	require.NoError(s.T, s.Stack.Tenancy.PublishSignature(s.Env, sha, readFile(s.T, out)))
}

// downloads counts the downloads of the bundle sha (not of its signature).
func (b *box) downloads(sha string) int {
	n := 0
	for _, r := range b.Stack.Tenancy.Requests() {
		if r.Path == "/v1/agent/bundles/"+sha {
			n++
		}
	}
	return n
}

// refusedForSignature runs a tick that must refuse the desired bundle with code:
// exit 1, the tick line names the code and the refusal, no lease, the live release as
// it was. (The report, the signature asked for, no download and no memory against the
// sha: deployd's TestSignatureRefusals.)
func (s *sigBox) refusedForSignature(code codes.Code, leases int, live string) {
	s.T.Helper()
	res := s.tickExit(deployd.ExitFailed)
	assert.Equal(s.T, string(code), tickCode(s.T, res.Stderr))
	assert.Contains(s.T, res.Stderr, "bundle refused for its signature (no lease taken")
	assert.Equal(s.T, leases, s.Leases(), "a signature refusal costs no lease")
	assert.Equal(s.T, live, s.Live())
}

// TestBinarySignatures drives trusted_keys through the shipped binary: keys from
// `monky-deployd keygen`, signatures from `monky-deployd sign` published to the fake
// tenancy. An unsigned bundle is SIGNATURE_MISSING and one signed by a key the box
// does not trust SIGNATURE_UNKNOWN_KEY, each before the download, exit 1, no lease;
// signed by the trusted key, the same bundle applies, exit 0, one lease; status names
// the trusted key.
func TestBinarySignatures(t *testing.T) {
	testprog.SkipIfShort(t)
	s := &sigBox{box: newBox(t, boxOpts{}), dir: t.TempDir()}
	trusted, trustedPub := s.keygen("renderer")
	other, otherPub := s.keygen("other")
	require.NotEqual(t, trustedPub.ID, otherPub.ID)
	s.Configure(func(c *deployd.Config) { c.TrustedKeys = []string{trustedPub.String()} })

	file, sha := s.publish("app-1.tar.gz", faketenancy.SampleApp(s.Env, 1))
	s.refusedForSignature(codes.SignatureMissing, 0, "")

	s.sign(file, sha, other, otherPub.ID)
	s.refusedForSignature(codes.SignatureUnknownKey, 0, "")

	s.sign(file, sha, trusted, trustedPub.ID)
	res := s.tickExit(deployd.ExitOK)
	assert.Equal(t, `""`, tickCode(t, res.Stderr), "a tick that applied has no code")
	assert.Contains(t, res.Stderr, "signature checked: signed by a trusted key for this env, sha and serial; downloading the bundle")
	assert.Contains(t, res.Stderr, "key_id="+string(trustedPub.ID))
	assert.Equal(t, 1, s.Leases())
	assert.Equal(t, 1, s.downloads(sha))
	assert.Equal(t, sha, s.Live())
	assert.Equal(t, "applied", s.LastReport().Result)
	assert.Equal(t, bundle.Serials{trustedPub.ID: 1}, s.State().SignedSerials)

	// The next release signed by the other key only: refused, the box keeps serving.
	file2, sha2 := s.publish("app-2.tar.gz", faketenancy.SampleApp(s.Env, 2))
	s.sign(file2, sha2, other, otherPub.ID)
	s.refusedForSignature(codes.SignatureUnknownKey, 1, sha)

	res = s.run([]string{"status", "--config", s.CfgPath})
	assert.Equal(t, 2, res.Code, "a refused signature needs a person: critical\n%s", res.Output())
	line := regexp.MustCompile(`(?m)^signatures: +(.*)$`).FindStringSubmatch(res.Stdout)
	require.NotNil(t, line, "status has no signatures line:\n%s", res.Stdout)
	assert.Equal(t, "required, trusted keys "+string(trustedPub.ID), strings.TrimSpace(line[1]))
	assert.Contains(t, res.Stdout, "key "+string(otherPub.ID)+" is not trusted by this box (trusted: "+string(trustedPub.ID)+")",
		"the last detail names the untrusted key and the trusted one")

	res = s.run([]string{"status", "--config", s.CfgPath, "--json"})
	assert.Equal(t, 2, res.Code, res.Output())
	assert.Contains(t, res.Stdout, string(trustedPub.ID))
}
