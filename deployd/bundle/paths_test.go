package bundle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

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
