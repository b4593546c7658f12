package deployd_test

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// renderer is a signing key of the tests: its private key, its id and its public key
// as a box's trusted_keys lists it.
type renderer struct {
	priv ed25519.PrivateKey
	id   bundle.KeyID
	pub  string
}

// newRenderer derives a key from seed, so that the ids in failures are the same run
// after run.
func newRenderer(t *testing.T, seed byte) renderer {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	pk, err := bundle.NewPublicKey(priv.Public().(ed25519.PublicKey))
	require.NoError(t, err)
	return renderer{priv: priv, id: pk.ID, pub: pk.String()}
}

// sign returns the signature file of st by r.
func (r renderer) sign(t *testing.T, st bundle.Statement, opt bundle.SignOptions) []byte {
	t.Helper()
	sig, err := bundle.Sign(r.priv, st, opt)
	require.NoError(t, err)
	return sig
}

// signedBox is a box that trusts keys.
func signedBox(t *testing.T, keys ...renderer) *box {
	t.Helper()
	return newBox(t, boxOptions{config: func(c *deployd.Config) {
		for _, k := range keys {
			c.TrustedKeys = append(c.TrustedKeys, k.pub)
		}
	}})
}

// publishAt publishes the sample app at serial (the manifest's and the check-in's) and
// makes it desired; it returns the sha.
func (b *box) publishAt(serial int64) string {
	b.T.Helper()
	sha := b.Publish(faketenancy.SampleApp(b.Env, serial))
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha, Serial: serial})
	return sha
}

// publishSigned is publishAt with a signature of it by r.
func (b *box) publishSigned(r renderer, serial int64) string {
	b.T.Helper()
	sha := b.publishAt(serial)
	require.NoError(b.T, b.Stack.Tenancy.PublishSignature(b.Env, sha, r.sign(b.T.(*testing.T), bundle.Statement{SHA: sha, EnvID: b.Env, Serial: serial}, bundle.SignOptions{})))
	return sha
}

// applySigned publishes the sample app of serial signed by r and runs a tick that must
// apply it; it returns the bundle's sha.
func (b *box) applySigned(r renderer, serial int64) string {
	b.T.Helper()
	sha := b.publishSigned(r, serial)
	b.tickExits(deployd.ExitOK)
	return sha
}

// downloads counts the downloads of the bundle sha: the requests under its path
// (GET /v1/agent/bundles/<sha>, and its signature) but its signature's.
func (b *box) downloads(sha string) int {
	return b.TenancyCalls("/v1/agent/bundles/"+sha) - b.signatureCalls(sha)
}

// signatureCalls counts the signature calls for sha.
func (b *box) signatureCalls(sha string) int {
	return b.TenancyCalls("/v1/agent/bundles/" + sha + "/signature")
}

// requireSignatureRefusal checks a tick refused sha for its signature with code: exit
// 1, reported failed with the code, no lease; before the download when downloaded is
// false; not remembered against the sha.
func (b *box) requireSignatureRefusal(out deployd.Outcome, exit int, sha string, code codes.Code, downloaded bool) {
	t := b.T
	t.Helper()
	require.Equal(t, deployd.ExitFailed, exit)
	assert.Equal(t, code, out.Code)
	assert.False(t, out.Leased)
	assert.Zero(t, b.Leases(), "a signature refusal costs no lease")
	if !downloaded {
		assert.Zero(t, b.downloads(sha), "the signature is checked before the download")
	}
	rep := b.LastReport()
	assert.Equal(t, "failed", rep.Result)
	assert.Equal(t, string(code), rep.Code)
	assert.Equal(t, sha, rep.SHA)
	_, remembered := b.State().Failed[sha]
	assert.False(t, remembered, "a signature refusal is not remembered against the sha")
}

func TestSignedBundleApplies(t *testing.T) {
	t.Parallel()
	r := newRenderer(t, 1)
	b := signedBox(t, r)
	sha := b.publishSigned(r, 1)

	out := b.tickApplied()
	assert.True(t, out.Leased)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, bundle.Serials{r.id: 1}, b.State().SignedSerials, "the ratchet records the serial under its key")

	// The order the box promises: signature, bundle, lease.
	var calls []string
	for _, req := range b.Stack.Tenancy.Requests() {
		switch req.Path {
		case "/v1/agent/bundles/" + sha + "/signature":
			calls = append(calls, "signature")
		case "/v1/agent/bundles/" + sha:
			calls = append(calls, "bundle")
		case "/v1/agent/lease":
			calls = append(calls, "lease")
		}
	}
	assert.Equal(t, []string{"signature", "bundle", "lease"}, calls)
	assert.Contains(t, b.Logs.String(), string(r.id), "the log names the signing key")
}

func TestSignatureRefusals(t *testing.T) {
	t.Parallel()
	r, stranger := newRenderer(t, 1), newRenderer(t, 2)
	tests := []struct {
		name string
		// sig is the signature published for sha at serial 1; nil publishes none.
		sig    func(t *testing.T, sha string) []byte
		code   codes.Code
		detail string
	}{
		{"unsigned", nil, codes.SignatureMissing, "not signed"},
		{"empty_file", func(*testing.T, string) []byte { return []byte{} }, codes.SignatureMissing, "not signed"},
		{"bad_signature", func(t *testing.T, sha string) []byte {
			sig := r.sign(t, bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 1}, bundle.SignOptions{})
			// Another valid statement under the first's signature bytes.
			other := r.sign(t, bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 2}, bundle.SignOptions{})
			i, j := bytes.LastIndex(sig, []byte("sig ")), bytes.LastIndex(other, []byte("sig "))
			return append(append([]byte{}, other[:j]...), sig[i:]...)
		}, codes.SignatureInvalid, "does not verify with the trusted key " + string(r.id)},
		{"other_env", func(t *testing.T, sha string) []byte {
			return r.sign(t, bundle.Statement{SHA: sha, EnvID: "env-dev-02", Serial: 1}, bundle.SignOptions{})
		}, codes.SignatureInvalid, "signed for env_id env-dev-02, this box is env-dev-01"},
		{"other_sha", func(t *testing.T, _ string) []byte {
			return r.sign(t, bundle.Statement{SHA: strings.Repeat("ab", 32), EnvID: "env-dev-01", Serial: 1}, bundle.SignOptions{})
		}, codes.SignatureInvalid, "signed for sha " + strings.Repeat("ab", 32)},
		{"other_serial", func(t *testing.T, sha string) []byte {
			return r.sign(t, bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 9}, bundle.SignOptions{})
		}, codes.SignatureInvalid, "signed for serial 9, the bundle is serial 1"},
		{"unknown_key", func(t *testing.T, sha string) []byte {
			return stranger.sign(t, bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 1}, bundle.SignOptions{})
		}, codes.SignatureUnknownKey, "key " + string(stranger.id) + " is not trusted by this box (trusted: " + string(r.id) + ")"},
		{"truncated", func(t *testing.T, sha string) []byte {
			sig := r.sign(t, bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 1}, bundle.SignOptions{})
			return sig[:len(sig)-20]
		}, codes.SignatureInvalid, ""},
		{"expired", func(t *testing.T, sha string) []byte {
			return r.sign(t, bundle.Statement{SHA: sha, EnvID: "env-dev-01", Serial: 1},
				bundle.SignOptions{Expires: time.Now().Add(-bundle.ClockTolerance - time.Hour)})
		}, codes.SignatureExpired, "the signature expired at"},
		{"too_large", func(*testing.T, string) []byte {
			return bytes.Repeat([]byte("x"), bundle.MaxSignatureSize+1)
		}, codes.SignatureInvalid, "longer than 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := signedBox(t, r)
			sha := b.publishAt(1)
			if tt.sig != nil {
				require.NoError(t, b.Stack.Tenancy.PublishSignature(b.Env, sha, tt.sig(t, sha)))
			}
			out, exit := b.tick()
			b.requireSignatureRefusal(out, exit, sha, tt.code, false)
			assert.Contains(t, b.LastReport().Detail, tt.detail)
			assert.Equal(t, 1, b.signatureCalls(sha))
			assert.Empty(t, b.Live(), "nothing was applied")
			assert.Empty(t, b.State().SignedSerials)
		})
	}
}

// A refusal is not remembered: publishing the signature mends the sha at the next
// tick, without a retry from tenancy.
func TestSignatureAddedLaterApplies(t *testing.T) {
	t.Parallel()
	r := newRenderer(t, 1)
	b := signedBox(t, r)
	sha := b.publishAt(1)
	out, exit := b.tick()
	b.requireSignatureRefusal(out, exit, sha, codes.SignatureMissing, false)

	require.NoError(t, b.Stack.Tenancy.PublishSignature(b.Env, sha, r.sign(t, bundle.Statement{SHA: sha, EnvID: b.Env, Serial: 1}, bundle.SignOptions{})))
	b.tickApplied()
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, 1, b.Leases())
}

func TestSignatureCallUnavailableIsTemporary(t *testing.T) {
	t.Parallel()
	r := newRenderer(t, 1)
	b := signedBox(t, r)
	sha := b.publishSigned(r, 1)
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"signature": 503}})
	b.tickEnds(deployd.ExitTemporary, codes.Unavailable)
	assert.Zero(t, b.Leases())
	assert.Zero(t, b.downloads(sha))
	assert.Empty(t, b.Stack.Tenancy.Reports(b.Env), "a temporary failure is not reported")
}

// A signed bundle whose manifest names another serial than the check-in and the
// signature is refused after Verify, before the lease.
func TestSignedManifestSerialMustMatch(t *testing.T) {
	t.Parallel()
	r := newRenderer(t, 1)
	b := signedBox(t, r)
	sha := b.Publish(faketenancy.SampleApp(b.Env, 3))
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha, Serial: 4})
	require.NoError(t, b.Stack.Tenancy.PublishSignature(b.Env, sha, r.sign(t, bundle.Statement{SHA: sha, EnvID: b.Env, Serial: 4}, bundle.SignOptions{})))
	out, exit := b.tick()
	b.requireSignatureRefusal(out, exit, sha, codes.SignatureInvalid, true)
	assert.Equal(t, 1, b.downloads(sha))
	assert.Contains(t, b.LastReport().Detail, "the manifest's serial 3 is not serial 4")
}

// TestSignatureReplayAndRollback: an older signed serial is refused as a replay (no
// lease, no download) unless tenancy asks for the rollback; the ratchet survives a
// state.json that does not parse (it comes back from the kept file).
func TestSignatureReplayAndRollback(t *testing.T) {
	t.Parallel()
	for _, corrupt := range []bool{false, true} {
		t.Run(map[bool]string{false: "state intact", true: "state.json corrupt"}[corrupt], func(t *testing.T) {
			t.Parallel()
			r := newRenderer(t, 1)
			b := signedBox(t, r)
			sha1 := b.applySigned(r, 1)
			sha2 := b.applySigned(r, 2)
			require.Equal(t, sha2, b.Live())
			require.Equal(t, 2, b.Leases())
			require.Equal(t, bundle.Serials{r.id: 2}, b.State().SignedSerials)
			downloads := b.downloads(sha1)
			if corrupt {
				require.NoError(t, os.WriteFile(b.Cfg.StatePath(), []byte(`{"schema":1,"signed_serials":{`), 0o600))
			}

			// Tenancy (or whoever answers for it) serves the older signed bundle again.
			b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha1, Serial: 1})
			out := b.tickEnds(deployd.ExitFailed, codes.SignatureReplay)
			assert.False(t, out.Leased)
			assert.Equal(t, 2, b.Leases(), "a replay costs no lease")
			assert.Equal(t, downloads, b.downloads(sha1), "nor a download")
			rep := b.LastReport()
			assert.Equal(t, string(codes.SignatureReplay), rep.Code)
			assert.Equal(t, sha1, rep.SHA)
			assert.Contains(t, rep.Detail, "serial 1 is lower than serial 2, applied on this box under key "+string(r.id))
			assert.Equal(t, sha2, b.Live())
			if corrupt {
				assert.Contains(t, b.Logs.String(), "state.json did not parse")
				st := b.State()
				assert.Equal(t, bundle.Serials{r.id: 2}, st.SignedSerials, "the ratchet survived")
				require.NotNil(t, st.Rebuilt)
				assert.Contains(t, st.Rebuilt.Kept, "1 signed serials")
			}

			// An explicit rollback to the signed older serial goes through.
			b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha1, Serial: 1, Rollback: true})
			b.tickApplied()
			assert.Equal(t, sha1, b.Live())
			assert.Equal(t, 3, b.Leases())
			assert.Equal(t, bundle.Serials{r.id: 2}, b.State().SignedSerials, "a rollback does not lower the ratchet")

			// The same serial again is not a replay: apply serial 2 anew.
			b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha2, Serial: 2})
			b.tickExits(deployd.ExitOK)
			assert.Equal(t, sha2, b.Live())
		})
	}
}

// A rollback is let through only as a signed bundle: an expired signature of the
// older serial stays refused.
func TestRollbackNeedsAValidSignature(t *testing.T) {
	t.Parallel()
	r := newRenderer(t, 1)
	b := signedBox(t, r)
	sha1 := b.applySigned(r, 1)
	b.applySigned(r, 2)

	require.NoError(t, b.Stack.Tenancy.PublishSignature(b.Env, sha1, r.sign(t, bundle.Statement{SHA: sha1, EnvID: b.Env, Serial: 1},
		bundle.SignOptions{Expires: time.Now().Add(-time.Hour - bundle.ClockTolerance)})))
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: sha1, Serial: 1, Rollback: true})
	b.tickEnds(deployd.ExitFailed, codes.SignatureExpired)
	assert.Equal(t, 2, b.Leases())
}

func TestSignatureKeyRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := newRenderer(t, 1), newRenderer(t, 2)
	b := signedBox(t, oldKey, newKey)
	b.applySigned(oldKey, 1)
	sha2 := b.applySigned(newKey, 2)
	assert.Equal(t, sha2, b.Live())
	assert.Equal(t, bundle.Serials{oldKey.id: 1, newKey.id: 2}, b.State().SignedSerials)

	// During the overlap the old key still signs new serials: both keys verify.
	sha3 := b.applySigned(oldKey, 3)
	assert.Equal(t, sha3, b.Live())

	// The old key is removed from the box: its signatures are unknown.
	b.Configure(func(c *deployd.Config) { c.TrustedKeys = []string{newKey.pub} })
	b.newAgent()
	sha4 := b.publishSigned(oldKey, 4)
	leases := b.Leases()
	b.tickEnds(deployd.ExitFailed, codes.SignatureUnknownKey)
	assert.Equal(t, leases, b.Leases())
	assert.Zero(t, b.downloads(sha4))
	assert.Contains(t, b.LastReport().Detail, "key "+string(oldKey.id)+" is not trusted by this box (trusted: "+string(newKey.id)+")")

	// The removed key's serials no longer count: the new key's serial 2 is the floor,
	// so serial 4 signed by the new key applies.
	require.NoError(t, b.Stack.Tenancy.PublishSignature(b.Env, sha4, newKey.sign(t, bundle.Statement{SHA: sha4, EnvID: b.Env, Serial: 4}, bundle.SignOptions{})))
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, sha4, b.Live())
}

// Without trusted keys the box asks for no signature and ignores a published one.
func TestWithoutKeysNoSignatureAsked(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	sha := b.publishAt(1)
	require.NoError(t, b.Stack.Tenancy.PublishSignature(b.Env, sha, []byte("not a signature")))
	b.tickApplied()
	assert.Equal(t, sha, b.Live())
	assert.Zero(t, b.signatureCalls(sha))
	assert.Empty(t, b.State().SignedSerials)
}

func TestMaxSignatureSizeAgrees(t *testing.T) {
	assert.Equal(t, bundle.MaxSignatureSize, tenancy.MaxSignatureSize, "the client reads what the format allows")
}

// TestLeaseDefaultsAgree: tenancy (which may not import deployd/bao) expects a lease
// to name the auth mount and role the OpenBao client logs in with by default.
func TestLeaseDefaultsAgree(t *testing.T) {
	assert.Equal(t, bao.DefaultAuthMount, tenancy.DefaultAuthMount)
	assert.Equal(t, bao.DefaultRole, tenancy.DefaultRole)
	d := deployd.DefaultConfig()
	assert.Equal(t, bao.DefaultAuthMount, d.Bao.AuthMount)
	assert.Equal(t, bao.DefaultRole, d.Bao.Role)
}
