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

// Some docker compose releases copy every .env entry that the process environment
// lacks into their own environment (os.Setenv), and the agent runs compose with PATH
// only. A bundle variable there reaches compose itself and the programs it runs
// (credential helpers, buildx, ssh): LD_PRELOAD of a bundle file is code on the host
// as root, a proxy or CA variable redirects compose's registry traffic, BUILDX_/
// BUILDKIT_ variables choose the builder. Such names are refused like COMPOSE_/DOCKER_.
func TestCheckEnvNameRefusesProcessVariables(t *testing.T) {
	for _, name := range []string{
		"LD_PRELOAD", "LD_LIBRARY_PATH", "ld_preload", "PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK",
		"HTTP_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
		"BUILDX_CONFIG", "BUILDKIT_HOST", "COMPOSE_FILE", "DOCKER_HOST",
	} {
		assert.NotEmpty(t, checkEnvName(name), name)
	}
	for _, name := range []string{"LOG_LEVEL", "DB_PASSWORD", "PATHNAME", "HOMEPAGE_URL", "APP_HOME", "LDAP_URL", "PROXY_URL"} {
		assert.Empty(t, checkEnvName(name), name)
	}
}
