package deployd_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// configGolden renders the effective config for a golden file.
func configGolden(t testing.TB, c deployd.Config) string {
	t.Helper()
	b, err := yaml.Marshal(c)
	require.NoError(t, err)
	return string(b)
}

func TestParseConfigGoldens(t *testing.T) {
	for _, name := range []string{"minimal", "full", "spec"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("testdata", "config", name+".yaml")
			c, err := deployd.LoadConfig(src)
			require.NoError(t, err)
			got := configGolden(t, c)
			goldenName := "config/" + name + ".golden.yaml"
			golden.Assert(t, goldenName, []byte(got))

			// The effective config parses back to itself.
			again, err := deployd.ParseConfig(golden.Path(goldenName), []byte(got))
			require.NoError(t, err)
			assert.Equal(t, c, again)
		})
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := deployd.LoadConfig(filepath.Join("testdata", "config", "minimal.yaml"))
	require.NoError(t, err)
	d := deployd.DefaultConfig()
	assert.Equal(t, "env-dev-01", c.EnvID)
	assert.Equal(t, "/srv/monky", c.DeployDir)
	assert.Equal(t, "/var/lib/monky-deployd", c.StateDir)
	assert.Equal(t, "/etc/monky-deployd/bootstrap.jwt", c.BootstrapGrant)
	assert.Equal(t, int64(1024), c.MinFreeMB)
	assert.Equal(t, deployd.TenancyConfig{
		Transport: "sdk", URL: "https://tenancy.monky.internal", Service: "monky-tenancy",
		Identity: "/etc/monky-deployd/identity.json", Timeout: deployd.Duration(30 * time.Second),
	}, c.Tenancy)
	assert.Equal(t, deployd.BaoConfig{
		Addr: "https://bao.monky.internal:8200", AuthMount: "jwt-tenancy", Role: "see-env", KVMount: "secret",
	}, c.Bao)
	assert.Equal(t, d.Compose, c.Compose)
	assert.Equal(t, deployd.Duration(5*time.Minute), c.Compose.HealthTimeout)
	assert.Equal(t, 3, c.Compose.KeepReleases)

	assert.Equal(t, "/var/lib/monky-deployd/bao.token", c.TokenPath())
	assert.Equal(t, "/var/lib/monky-deployd/state.json", c.StatePath())
	assert.Equal(t, "/var/lib/monky-deployd/lock", c.LockPath())
	assert.Equal(t, "/srv/monky/releases", c.ReleasesDir())
	assert.Equal(t, "/srv/monky/current", c.CurrentLink())
}

func TestParseConfigNullKeepsDefault(t *testing.T) {
	c, err := deployd.ParseConfig("config.yaml", []byte(configBase+"deploy_dir:\ncompose:\n  keep_releases: ~\n  allow_privileged:\n"))
	require.NoError(t, err)
	assert.Equal(t, "/srv/monky", c.DeployDir)
	assert.Equal(t, 3, c.Compose.KeepReleases)
	assert.Empty(t, c.Compose.AllowPrivileged)
}

func TestParseConfigAliases(t *testing.T) {
	src := "env_id: &e env-dev-01\ntenancy:\n  url: &u https://t.monky.internal\n  service: *e\nbao:\n  addr: https://b.monky.internal\n"
	c, err := deployd.ParseConfig("config.yaml", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, "env-dev-01", c.Tenancy.Service)
}

func TestTier(t *testing.T) {
	for env, tier := range map[string]string{"env-prod-03": "prod", "env-dev-01": "dev", "env-stage2-10": "stage2", "env-prod-3": "", "prod-03": "", "": ""} {
		assert.Equal(t, tier, deployd.Config{EnvID: env}.Tier(), env)
	}
}

// configBase is a valid config; bad cases append to it or replace it.
const configBase = `env_id: env-dev-01
tenancy:
  url: https://tenancy.monky.internal
bao:
  addr: https://bao.monky.internal:8200
`

// configBadCases are configs that must be refused, with the exact error text (errors
// joined by newlines). They also seed FuzzParseConfig.
var configBadCases = []struct {
	name string
	src  string
	want string
}{
	{"empty file", "", "config.yaml: empty config"},
	{"only comments", "# nothing\n\n", "config.yaml: empty config"},
	{"empty document", "---\n", "config.yaml: empty config"},
	{"top level list", "- a\n- b\n", "config.yaml:1: want a mapping of keys at the top, got a list"},
	{"top level scalar", "hello\n", "config.yaml:1: want a mapping of keys at the top, got a string"},
	{"two documents", configBase + "---\nenv_id: env-dev-02\n", "config.yaml:6: more than one YAML document"},
	{"syntax error", "env_id: env-dev-01\ntenancy:\n  url: [\n", "config.yaml:3: YAML syntax: did not find expected node content"},
	{"tab indentation", "env_id: a\n\tbao: x\n", "config.yaml:2: YAML syntax: found a tab character that violates indentation"},
	{"unknown top key", configBase + "env: x\n", `config.yaml:6: unknown key "env"`},
	{"unknown nested key", "env_id: env-dev-01\ntenancy:\n  url: https://t.monky.internal\n  transport: proxy\n  proxy: http://127.0.0.1:8080\n  timeout: 30s\n  proxxy: http://x\nbao:\n  addr: https://b.monky.internal\n",
		`config.yaml:7: unknown key "tenancy.proxxy"`},
	{"merge key", "x: &a {role: r}\n" + configBase, `config.yaml:1: unknown key "x"`},
	{"merge key in a section", configBase + "compose:\n  <<: {project: p}\n", `config.yaml:7: unknown key "compose.<<"`},
	{"duplicate top key", configBase + "env_id: env-dev-02\n", `config.yaml:6: duplicate key "env_id" (first at line 1)`},
	{"duplicate nested key", "env_id: env-dev-01\ntenancy:\n  url: https://a.monky.internal\n  url: https://b.monky.internal\nbao:\n  addr: https://b.monky.internal\n",
		`config.yaml:4: duplicate key "tenancy.url" (first at line 3)`},
	{"duplicate section", configBase + "bao:\n  role: r\n", `config.yaml:6: duplicate key "bao" (first at line 4)`},
	{"int for a string", configBase + "compose:\n  project: 5\n", `config.yaml:7: key "compose.project": want a string, got an integer`},
	{"bool for a string", configBase + "compose:\n  docker: true\n", `config.yaml:7: key "compose.docker": want a string, got a boolean`},
	{"string for an int", configBase + "min_free_mb: lots\n", `config.yaml:6: key "min_free_mb": want an integer, got a string`},
	{"float for an int", configBase + "min_free_mb: 1.5\n", `config.yaml:6: key "min_free_mb": want an integer, got a number`},
	{"overflowing int", configBase + "min_free_mb: 99999999999999999999\n", `config.yaml:6: key "min_free_mb": want an integer, got a number`},
	{"mapping for a string", configBase + "deploy_dir: {a: b}\n", `config.yaml:6: key "deploy_dir": want a string, got a mapping`},
	{"scalar for a section", configBase + "compose: monky\n", `config.yaml:6: key "compose": want a mapping, got a string`},
	{"string for a list", configBase + "compose:\n  allow_privileged: web\n", `config.yaml:7: key "compose.allow_privileged": want a list of strings, got a string`},
	{"list of mixed", configBase + "compose:\n  allow_privileged:\n    - web\n    - 3\n", `config.yaml:9: key "compose.allow_privileged": item 2: want a string, got an integer`},
	{"number for a duration", configBase + "compose:\n  health_timeout: 300\n", `config.yaml:7: key "compose.health_timeout": want a duration such as "30s", got an integer`},
	{"bad duration", configBase + "compose:\n  health_timeout: 5 minutes\n", `config.yaml:7: key "compose.health_timeout": want a duration such as "30s", got "5 minutes"`},
	{"non-scalar key", configBase + "? [a]\n: b\n", `config.yaml:6: want a plain key in the top level, got a list`},
	{"several parse errors", configBase + "envid: x\nbao2: y\n", "config.yaml:6: unknown key \"envid\"\nconfig.yaml:7: unknown key \"bao2\""},

	{"missing env_id", "tenancy:\n  url: https://t.monky.internal\nbao:\n  addr: https://b.monky.internal\n", `config.yaml: key "env_id": required`},
	{"bad env_id", strings.Replace(configBase, "env-dev-01", "env-dev-1", 1), `config.yaml:1: key "env_id": "env-dev-1" does not match ^env-[a-z0-9]+-[0-9]{2}$`},
	{"env_id upper case", strings.Replace(configBase, "env-dev-01", "env-DEV-01", 1), `config.yaml:1: key "env_id": "env-DEV-01" does not match ^env-[a-z0-9]+-[0-9]{2}$`},
	{"relative deploy_dir", configBase + "deploy_dir: srv/monky\n", `config.yaml:6: key "deploy_dir": want an absolute path, got "srv/monky"`},
	{"empty state_dir", configBase + "state_dir: \"\"\n", `config.yaml:6: key "state_dir": required`},
	{"relative grant", configBase + "bootstrap_grant: bootstrap.jwt\n", `config.yaml:6: key "bootstrap_grant": want an absolute path, got "bootstrap.jwt"`},
	{"negative min_free_mb", configBase + "min_free_mb: -1\n", `config.yaml:6: key "min_free_mb": must not be negative, got -1`},
	{"unknown transport", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  transport: ziti\n", 1), `config.yaml:3: key "tenancy.transport": want sdk, proxy or system, got "ziti"`},
	{"missing url", "env_id: env-dev-01\nbao:\n  addr: https://b.monky.internal\n", `config.yaml: key "tenancy.url": required`},
	{"url without scheme", strings.Replace(configBase, "https://tenancy.monky.internal", "tenancy.monky.internal", 1), `config.yaml:3: key "tenancy.url": want an absolute http/https URL with a host`},
	{"url with another scheme", strings.Replace(configBase, "https://tenancy.monky.internal", "ftp://tenancy.monky.internal", 1), `config.yaml:3: key "tenancy.url": want an absolute http/https URL with a host, got scheme "ftp"`},
	{"url without host", strings.Replace(configBase, "https://tenancy.monky.internal", "https:///v1", 1), `config.yaml:3: key "tenancy.url": want an absolute http/https URL with a host`},
	{"url with credentials", strings.Replace(configBase, "https://tenancy.monky.internal", "https://agent:hunter2-pw@tenancy.monky.internal", 1), `config.yaml:3: key "tenancy.url": must not carry credentials (user:password@); keep secrets out of the config`},
	{"url with query", strings.Replace(configBase, "https://tenancy.monky.internal", "https://tenancy.monky.internal/?token=abc", 1), `config.yaml:3: key "tenancy.url": must not have a query or a fragment`},
	{"sdk without identity", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  identity: \"\"\n", 1), `config.yaml:3: key "tenancy.identity": required`},
	{"sdk without service", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  service: \"\"\n", 1), `config.yaml:3: key "tenancy.service": required with transport sdk`},
	{"proxy without proxy url", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  transport: proxy\n", 1), `config.yaml: key "tenancy.proxy": required with transport proxy`},
	{"proxy with bad scheme", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  transport: proxy\n  proxy: ziti://x\n", 1), `config.yaml:4: key "tenancy.proxy": want an absolute http/https/socks5/socks5h URL with a host, got scheme "ziti"`},
	{"relative ca_file", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  ca_file: ca.pem\n", 1), `config.yaml:3: key "tenancy.ca_file": want an absolute path, got "ca.pem"`},
	{"bad server_name", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  server_name: https://x\n", 1), `config.yaml:3: key "tenancy.server_name": want a host name, got "https://x"`},
	{"zero timeout", strings.Replace(configBase, "tenancy:\n", "tenancy:\n  timeout: 0s\n", 1), `config.yaml:3: key "tenancy.timeout": must be positive, got 0s`},
	{"negative health_timeout", configBase + "compose:\n  health_timeout: -5m\n", `config.yaml:7: key "compose.health_timeout": must be positive, got -5m0s`},
	{"missing bao addr", "env_id: env-dev-01\ntenancy:\n  url: https://t.monky.internal\n", `config.yaml: key "bao.addr": required`},
	{"bao addr credentials", strings.Replace(configBase, "https://bao.monky.internal:8200", "https://root:s3cret@bao.monky.internal:8200", 1), `config.yaml:5: key "bao.addr": must not carry credentials (user:password@); keep secrets out of the config`},
	{"bad auth_mount", configBase[:len(configBase)-1] + "\n  auth_mount: /jwt/\n", `config.yaml:6: key "bao.auth_mount": want a mount path such as "secret" (no leading or trailing slash, no . or .. segments), got "/jwt/"`},
	{"kv_mount dot-dot", configBase[:len(configBase)-1] + "\n  kv_mount: secret/../x\n", `config.yaml:6: key "bao.kv_mount": want a mount path such as "secret" (no leading or trailing slash, no . or .. segments), got "secret/../x"`},
	{"empty role", configBase[:len(configBase)-1] + "\n  role: \"\"\n", `config.yaml:6: key "bao.role": required`},
	{"role with slash", configBase[:len(configBase)-1] + "\n  role: a/b\n", `config.yaml:6: key "bao.role": want a role name without slashes or spaces, got "a/b"`},
	{"bad namespace", configBase[:len(configBase)-1] + "\n  namespace: a//b\n", `config.yaml:6: key "bao.namespace": want a mount path such as "secret" (no leading or trailing slash, no . or .. segments), got "a//b"`},
	{"bad project", configBase + "compose:\n  project: Monky\n", `config.yaml:7: key "compose.project": "Monky" is not a compose project name (^[a-z0-9][a-z0-9_-]*$)`},
	{"relative docker path", configBase + "compose:\n  docker: bin/docker\n", `config.yaml:7: key "compose.docker": want a command name or an absolute path, got "bin/docker"`},
	{"keep_releases zero", configBase + "compose:\n  keep_releases: 0\n", `config.yaml:7: key "compose.keep_releases": must be at least 1, got 0`},
	{"bad service name", configBase + "compose:\n  allow_privileged: [web, \"bad name!\"]\n", `config.yaml:7: key "compose.allow_privileged": "bad name!" is not a valid service name`},
	{"service listed twice", configBase + "compose:\n  allow_privileged: [web, web]\n", `config.yaml:7: key "compose.allow_privileged": "web" is listed twice`},
	{"trusted key not a key", configBase + "trusted_keys:\n  - ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=\n  - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\n",
		`config.yaml:6: key "trusted_keys": item 2: bundle: invalid key: a public key is ed25519:<base64 of the 32-byte key>`},
	{"trusted key short", configBase + "trusted_keys: [\"ed25519:AAAA\"]\n",
		`config.yaml:6: key "trusted_keys": item 1: bundle: invalid key: an ed25519 public key is 32 bytes, this one is 3`},
	{"trusted key private", configBase + "trusted_keys: [\"-----BEGIN PRIVATE KEY----- MC4CAQAwBQYDK2VwBCIEIHunter2s3cret\"]\n",
		`config.yaml:6: key "trusted_keys": item 1: bundle: invalid key: this is a private key; give the public key (ed25519:<base64>, the .pub file of monky-deployd keygen)`},
	{"trusted key twice", configBase + "trusted_keys:\n  - ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=\n  - \" ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=\"\n",
		`config.yaml:6: key "trusted_keys": item 2: key 34750f98bd59fcfc is listed twice (item 1)`},
	{"holds.max under a minute", configBase + "holds:\n  max: 30s\n", `config.yaml:7: key "holds.max": must be at least 1m0s, got 30s`},
	{"relative holds.dir", configBase + "holds:\n  dir: hold\n", `config.yaml:7: key "holds.dir": want an absolute path, got "hold"`},
	{"windows not a list", configBase + "windows: mon-fri\n", `config.yaml:6: key "windows": want a list of mappings, got a string`},
	{"window not a mapping", configBase + "windows: [mon-fri]\n", `config.yaml:6: key "windows[1]": want a mapping, got a string`},
	{"window unknown key", configBase + "windows:\n  - {days: daily, from: \"19:00\", to: \"07:00\", zone: UTC}\n", `config.yaml:7: unknown key "windows[1].zone"`},
	{"window without to", configBase + "windows:\n  - days: daily\n    from: \"19:00\"\n", `config.yaml:7: key "windows[1]": days, from and to are required`},
	{"window bad days", configBase + "windows:\n  - {days: weekdays, from: \"19:00\", to: \"07:00\"}\n", `config.yaml:7: key "windows[1]": days: "weekdays" is not a day or a range of days (mon, tue, wed, thu, fri, sat, sun)`},
	{"window bad time", configBase + "windows:\n  - {days: daily, from: \"7pm\", to: \"07:00\"}\n", `config.yaml:7: key "windows[1]": from: want a time of day such as "19:00", got "7pm"`},
	{"window bad tz", configBase + "windows:\n  - {days: daily, from: \"19:00\", to: \"07:00\", tz: Mars/Olympus}\n", `config.yaml:7: key "windows[1]": tz: "Mars/Olympus" is not a time zone this box knows (the tzdata package holds them)`},
	{"all problems at once", "env_id: env-x\ntenancy:\n  transport: ziti\n  url: nope\nbao:\n  addr: https://b.monky.internal\ncompose:\n  keep_releases: 0\n",
		"config.yaml:1: key \"env_id\": \"env-x\" does not match ^env-[a-z0-9]+-[0-9]{2}$\n" +
			"config.yaml:3: key \"tenancy.transport\": want sdk, proxy or system, got \"ziti\"\n" +
			"config.yaml:4: key \"tenancy.url\": want an absolute http/https URL with a host\n" +
			"config.yaml:8: key \"compose.keep_releases\": must be at least 1, got 0"},
}

func TestParseConfigBad(t *testing.T) {
	for _, tt := range configBadCases {
		t.Run(tt.name, func(t *testing.T) {
			c, err := deployd.ParseConfig("config.yaml", []byte(tt.src))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Equal(t, deployd.Config{}, c, "no half-parsed config on error")

			require.ErrorIs(t, err, deployd.ErrConfigInvalid)
			var ce *deployd.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, codes.ConfigInvalid, ce.Code())
			assert.Equal(t, "config.yaml", ce.File)
			if strings.Contains(ce.Msg, "key \"") || strings.HasPrefix(ce.Msg, "unknown key") || strings.HasPrefix(ce.Msg, "duplicate key") {
				assert.NotEmpty(t, ce.Key, "a message about a key has Key set")
			}
			// Never an echo of a credential.
			assert.NotContains(t, err.Error(), "hunter2-pw")
			assert.NotContains(t, err.Error(), "s3cret")
			assert.NotContains(t, err.Error(), "token=abc")
		})
	}
}

// TestLoadConfigErrors: a config file that is missing, too large or holds an unknown
// key, or a path that is not a regular file (a fifo, which a blocking open would wait
// on for ever for a writer, or a directory) is refused at once, naming the path and
// what is wrong.
func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	fifo, big, bad := filepath.Join(dir, "fifo.yaml"), filepath.Join(dir, "big.yaml"), filepath.Join(dir, "config.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.WriteFile(big, []byte(configBase+"# "+strings.Repeat("x", 1<<20)+"\n"), 0o600))
	require.NoError(t, os.WriteFile(bad, []byte(configBase+"tenancy2: {}\n"), 0o600))
	for _, tc := range []struct {
		path, want string
		is         error
	}{
		{filepath.Join(dir, "missing.yaml"), ": cannot read: no such file or directory", os.ErrNotExist},
		{big, ": larger than 1048576 bytes", nil},
		{bad, `:6: unknown key "tenancy2"`, nil},
		{fifo, ": cannot read: a fifo, not a regular file", fsutil.ErrNotRegular},
		{dir, ": cannot read: a directory, not a regular file", fsutil.ErrNotRegular},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := deployd.LoadConfig(tc.path)
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, deployd.ErrConfigInvalid)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			assert.Equal(t, codes.ConfigInvalid, deployd.CodeOf(err))
			assert.Equal(t, tc.path+tc.want, err.Error())
		case <-time.After(5 * time.Second):
			t.Fatalf("LoadConfig(%s) hangs", tc.path)
		}
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	c := deployd.DefaultConfig()
	err := c.Validate()
	require.Error(t, err)
	assert.Equal(t, "key \"env_id\": required\nkey \"tenancy.url\": required\nkey \"bao.addr\": required", err.Error())

	c.EnvID = "env-dev-01"
	c.Tenancy.Transport = "system"
	c.Tenancy.URL = "http://127.0.0.1:8080"
	c.Tenancy.Identity = "" // not needed with system
	c.Bao.Addr = "http://127.0.0.1:8200"
	require.NoError(t, c.Validate())

	var zero deployd.Config
	err = zero.Validate()
	require.Error(t, err)
	var ce *deployd.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "env_id", ce.Key)
	assert.Zero(t, ce.Line)
}

func FuzzParseConfig(f *testing.F) {
	for _, tt := range configBadCases {
		f.Add([]byte(tt.src))
	}
	for _, name := range []string{"minimal", "full", "spec"} {
		b, err := os.ReadFile(filepath.Join("testdata", "config", name+".yaml"))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := deployd.ParseConfig("config.yaml", data)
		if err != nil {
			var ce *deployd.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a *ConfigError: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "config.yaml") {
				t.Fatalf("error does not name the file: %q", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := deployd.ParseConfig("again.yaml", out)
		if err != nil {
			t.Fatalf("effective config does not parse back: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, again)
		}
	})
}

func ExampleParseConfig() {
	_, err := deployd.ParseConfig("config.yaml", []byte(`env_id: env-dev-01
tenancy:
  url: https://tenancy.monky.internal
  proxxy: http://127.0.0.1:8080
bao:
  addr: https://bao.monky.internal:8200
`))
	fmt.Println(err)

	c, err := deployd.ParseConfig("config.yaml", []byte(`env_id: env-prod-03
tenancy:
  url: https://tenancy.monky.internal
bao:
  addr: https://bao.monky.internal:8200
`))
	fmt.Println(err, c.Tier(), c.Tenancy.Transport, c.Tenancy.Timeout, c.TokenPath())
	// Output:
	// config.yaml:4: unknown key "tenancy.proxxy"
	// <nil> prod sdk 30s /var/lib/monky-deployd/bao.token
}

func TestConfigKeyRing(t *testing.T) {
	c, err := deployd.LoadConfig(filepath.Join("testdata", "config", "full.yaml"))
	require.NoError(t, err)
	ring, err := c.KeyRing()
	require.NoError(t, err)
	assert.Equal(t, 2, ring.Len())
	_, ok := ring.Lookup("34750f98bd59fcfc")
	assert.True(t, ok, "the first key's id")

	none, err := deployd.DefaultConfig().KeyRing()
	require.NoError(t, err)
	assert.Equal(t, 0, none.Len(), "no keys: signatures not required")

	c.TrustedKeys = []string{"ed25519:n?pe"}
	_, err = c.KeyRing()
	require.ErrorIs(t, err, deployd.ErrConfigInvalid)
	assert.Equal(t, `key "trusted_keys": item 1: bundle: invalid key: the key after ed25519: is not standard base64`, err.Error())
}

// A Config built in code starts from DefaultConfig, sets what has no default and what
// differs, and is checked with Validate.
func ExampleDefaultConfig() {
	cfg := deployd.DefaultConfig()
	cfg.EnvID = "env-dev-01"
	cfg.Tenancy.URL = "https://tenancy.monky.internal"
	cfg.Tenancy.Transport = "system"
	cfg.Bao.Addr = "https://bao.monky.internal:8200"
	cfg.Compose.HealthTimeout = deployd.Duration(2 * time.Minute)
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.StatePath(), cfg.Compose.KeepReleases, cfg.Compose.HealthTimeout)
	// Output: /var/lib/monky-deployd/state.json 3 2m0s
}
