package main

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
)

// TestStatusSaysWhetherBundlesAreSigned: without trusted_keys, status says bundles are
// not signed; with them, it names the trusted key ids and the replay ratchet.
func TestStatusSaysWhetherBundlesAreSigned(t *testing.T) {
	cfg := deployd.DefaultConfig()
	cfg.EnvID = "env-dev-01"
	v := buildStatus(cfg, deployd.State{}, tokenFile{state: tokenMissing}, time.Now())
	assert.False(t, v.Signatures.Required)
	assert.Empty(t, v.Signatures.Keys)
	assert.Equal(t, "not required (no trusted_keys): bundles are not signed", signaturesLine(v.Signatures))

	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	pk, err := bundle.NewPublicKey(pub)
	require.NoError(t, err)
	cfg.TrustedKeys = []string{pk.String()}
	st := deployd.State{SignedSerials: bundle.Serials{pk.ID: 7}}
	v = buildStatus(cfg, st, tokenFile{state: tokenPresent}, time.Now())
	assert.True(t, v.Signatures.Required)
	assert.Equal(t, []string{string(pk.ID)}, v.Signatures.Keys)
	assert.Equal(t, map[string]int64{string(pk.ID): 7}, v.Signatures.Serials)
	assert.Equal(t, "required, trusted keys "+string(pk.ID), signaturesLine(v.Signatures))
}
