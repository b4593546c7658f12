package packaging_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
)

// TestKitConfigsParse feeds every config the kit can write to the agent's own strict
// parser. testdata/config.install.yaml is what install.sh writes and
// testdata/config.ansible*.yaml what the ansible template renders: check.sh regenerates
// both and fails when they differ from these files, so this test covers the real output.
func TestKitConfigsParse(t *testing.T) {
	// The URLs every config names; env-dev-01 unless it says otherwise.
	dev01 := func(c *deployd.Config) {
		c.EnvID = "env-dev-01"
		c.Tenancy.URL = "https://tenancy.monky.internal"
		c.Bao.Addr = "https://bao.monky.internal:8200"
	}
	sdkDev01 := func(c *deployd.Config) {
		dev01(c)
		c.DeployDir = "/data/monky"
		c.MinFreeMB = 2048
		c.Tenancy.Service = "monky's tenancy"
		c.Bao.Namespace = "ops/team-a"
		c.Compose.HealthTimeout = deployd.Duration(5 * time.Minute)
		c.Compose.KeepReleases = 3
		c.Compose.AllowPrivileged = []string{"cadvisor", "node-exporter"}
	}
	// The kit's configs with trusted keys (install.sh --trusted-key, the role's
	// monky_deployd_trusted_keys); the others trust none: signatures are not asked for.
	keyed := func(c *deployd.Config) {
		dev01(c)
		c.Tenancy.Transport = "system"
		c.TrustedKeys = []string{trustedKeyDocs, trustedKeyRFC8032}
	}
	tests := []struct {
		file string
		want func(*deployd.Config) // applied to DefaultConfig
	}{
		{"testdata/config.install.yaml", sdkDev01},
		{"testdata/config.ansible.yaml", sdkDev01},
		{"testdata/config.ansible-proxy.yaml", func(c *deployd.Config) {
			dev01(c)
			c.EnvID = "env-prod-03"
			c.Tenancy.Transport = "proxy"
			c.Tenancy.Proxy = "http://127.0.0.1:8080"
			c.Tenancy.CAFile = "/etc/ssl/monky/ca.pem"
			c.Tenancy.ServerName = "tenancy.monky.internal"
			c.Bao.CAFile = "/etc/ssl/monky/ca.pem"
		}},
		{"testdata/config.install-keys.yaml", keyed},
		{"testdata/config.ansible-keys.yaml", keyed},
		{"config.yaml.example", func(c *deployd.Config) {
			dev01(c)
			c.Compose.AllowPrivileged = []string{}
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			got, err := deployd.LoadConfig(tt.file)
			require.NoError(t, err)
			// the parser is strict: a key outside the config keys of
			// docs/OPERATIONS.md, at the top or as a section, is refused by name
			data, err := os.ReadFile(tt.file)
			require.NoError(t, err)
			for _, extra := range []string{"log_level: 'debug'\n", "approle:\n  role_id: 'x'\n"} {
				_, err := deployd.ParseConfig("config.yaml", append(data[:len(data):len(data)], extra...))
				assert.ErrorContains(t, err, strings.Split(extra, ":")[0])
			}

			want := deployd.DefaultConfig()
			tt.want(&want)
			// every key, the defaults included; the list of privileges in any order
			assert.ElementsMatch(t, want.Compose.AllowPrivileged, got.Compose.AllowPrivileged)
			want.Compose.AllowPrivileged, got.Compose.AllowPrivileged = nil, nil
			if len(want.TrustedKeys) == 0 {
				assert.Empty(t, got.TrustedKeys)
				want.TrustedKeys, got.TrustedKeys = nil, nil
			}
			assert.Equal(t, want, got)
			if len(want.TrustedKeys) == 0 {
				return
			}
			ring, err := got.KeyRing()
			require.NoError(t, err)
			rfc, err := bundle.ParsePublicKey(trustedKeyRFC8032)
			require.NoError(t, err)
			assert.ElementsMatch(t, []bundle.KeyID{trustedKeyDocsID, rfc.ID}, ring.IDs())
		})
	}
}
