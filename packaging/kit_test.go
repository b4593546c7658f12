package packaging_test

import (
	"bytes"
	"os"
	"os/exec"
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

// The two keys of the trusted_keys goldens: the key of docs/OPERATIONS.md ("Trusting
// signing keys") and the public key of RFC 8032's first Ed25519 test vector.
const (
	trustedKeyDocs    = "ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w="
	trustedKeyDocsID  = "34750f98bd59fcfc"
	trustedKeyRFC8032 = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
)

// kitArgs are install.sh's arguments for a new box of env-dev-01 under root, then more.
func kitArgs(root string, more ...string) []string {
	return append([]string{"--root", root, "--skip-package", "--env-id", "env-dev-01",
		"--tenancy-url", "https://tenancy.monky.internal", "--bao-addr", "https://bao.monky.internal:8200"}, more...)
}

// runKit runs install.sh with args and returns its exit code, stdout and stderr.
func runKit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command("bash", append([]string{"install.sh"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr, "install.sh did not run")
		code = exitErr.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// TestKitTrustedKeysInstall runs install.sh --root with --trusted-key and
// --trusted-key-file: it writes testdata/config.install-keys.yaml, which the agent
// loads; a kept config is not changed by --trusted-key, and the kit says so.
func TestKitTrustedKeysInstall(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "renderer-2.pub")
	require.NoError(t, os.WriteFile(pub, []byte(trustedKeyRFC8032+"\n"), 0o644))
	root := filepath.Join(dir, "root")

	// the arguments testdata/config.install-keys.yaml is written with (check.sh runs the same)
	code, stdout, stderr := runKit(t, kitArgs(root, "--transport", "system", "--trusted-key", trustedKeyDocs, "--trusted-key-file", pub)...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	config := filepath.Join(root, "etc", "monky-deployd", "config.yaml")
	got, err := os.ReadFile(config)
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/config.install-keys.yaml")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "install.sh's config differs from testdata/config.install-keys.yaml")
	cfg, err := deployd.LoadConfig(config)
	require.NoError(t, err)
	assert.Equal(t, []string{trustedKeyDocs, trustedKeyRFC8032}, cfg.TrustedKeys)

	code, stdout, stderr = runKit(t, "--root", root, "--skip-package", "--trusted-key", trustedKeyRFC8032)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "note: --trusted-key ignored: the kept config's trusted_keys stay as they are (--force-config rewrites it)")
	assert.Contains(t, stdout, "done: nothing changed")
	again, err := os.ReadFile(config)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(again))
}

// TestKitTrustedKeysRefused checks that install.sh refuses, before it writes anything,
// a trusted key the agent would refuse, with a message naming the option that never
// repeats the key's text.
func TestKitTrustedKeysRefused(t *testing.T) {
	dir := t.TempDir()
	priv := filepath.Join(dir, "renderer")
	privPEM := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n"
	require.NoError(t, os.WriteFile(priv, []byte(privPEM), 0o600))
	bad := filepath.Join(dir, "bad.pub")
	require.NoError(t, os.WriteFile(bad, []byte("ed25519:AAAA\n"), 0o644))
	pub := filepath.Join(dir, "good.pub")
	require.NoError(t, os.WriteFile(pub, []byte(trustedKeyDocs+"\n"), 0o644))

	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"short", []string{"--trusted-key", "ed25519:AAAA"}, "--trusted-key must be an ed25519 public key, ed25519:<base64 of 32 bytes>"},
		{"other algorithm", []string{"--trusted-key", "rsa:" + strings.TrimPrefix(trustedKeyDocs, "ed25519:")}, "--trusted-key must be an ed25519 public key"},
		// Strict base64: the two bits the last character leaves over are zero.
		{"not strict base64", []string{"--trusted-key", strings.TrimSuffix(trustedKeyDocs, "w=") + "x="}, "--trusted-key must be an ed25519 public key"},
		{"unpadded", []string{"--trusted-key", strings.TrimSuffix(trustedKeyDocs, "=")}, "--trusted-key must be an ed25519 public key"},
		{"a path", []string{"--trusted-key", pub}, "--trusted-key takes the key itself (ed25519:<base64>, the text of the .pub), not a file; use --trusted-key-file PATH"},
		{"a private key", []string{"--trusted-key", privPEM}, "--trusted-key: this is a private key"},
		{"twice", []string{"--trusted-key", trustedKeyDocs, "--trusted-key-file", pub}, "--trusted-key: trusted key 2 is given twice (the same as trusted key 1)"},
		{"no value", []string{"--trusted-key"}, "option --trusted-key needs a value"},
		{"file missing", []string{"--trusted-key-file", filepath.Join(dir, "nope.pub")}, "--trusted-key-file: no such file"},
		{"file with a private key", []string{"--trusted-key-file", priv}, "--trusted-key-file: " + priv + " is a private key"},
		{"file with a bad key", []string{"--trusted-key-file", bad}, "--trusted-key-file must be an ed25519 public key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			code, stdout, stderr := runKit(t, kitArgs(root, tt.args...)...)
			assert.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stderr, tt.msg)
			assert.NotContains(t, stdout+stderr, "MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp", "install.sh printed the private key")
			assert.NotContains(t, stdout+stderr, "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1", "install.sh printed the key")
			_, err := os.Stat(root)
			assert.True(t, os.IsNotExist(err), "install.sh created %s before refusing", root)
		})
	}
}
