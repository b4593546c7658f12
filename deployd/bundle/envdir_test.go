package bundle

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// The release's root .env is the agent's: a bundle may carry neither a file nor a
// directory of that name, and a file inside ".env/" makes one. Without the refusal
// the bundle verifies, costs a lease, and staging fails when the agent writes .env.
func TestVerifyRefusesEnvDirectoryByImplication(t *testing.T) {
	data := withManifest(t, func(m *Manifest) { m.Files = append(m.Files, ".env/x") },
		append(goodEnts(t)[1:], file(".env/x", "A=1\n"))...)
	_, err := Verify(context.Background(), bytes.NewReader(data), expect())
	require.ErrorIs(t, err, ErrRefused)
	var re *RefusedError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, refusalCodes(re.Refusals), codes.ManifestPaths)
	assert.Contains(t, re.Error(), "reserved")
}
