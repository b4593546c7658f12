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

// badConfig is a config that must be refused, with the exact error text (errors
// joined by newlines).
type badConfig struct{ name, src, want string }

// configBadCases reads testdata/config/bad.txtar: each case is a "-- NAME.yaml --"
// section, the config, and a "-- NAME.want --" section, its error text. They also
// seed FuzzParseConfig.
func configBadCases(t testing.TB) []badConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "config", "bad.txtar"))
	require.NoError(t, err)
	var cases []badConfig
	inWant := false
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if marker, ok := strings.CutPrefix(line, "-- "); ok && strings.HasSuffix(marker, " --\n") {
			name, yaml := strings.CutSuffix(strings.TrimSuffix(marker, " --\n"), ".yaml")
			if yaml {
				cases = append(cases, badConfig{name: name})
			}
			inWant = !yaml
			continue
		}
		switch {
		case len(cases) == 0:
		case inWant:
			cases[len(cases)-1].want += line
		default:
			cases[len(cases)-1].src += line
		}
	}
	for i := range cases {
		cases[i].want = strings.TrimSuffix(cases[i].want, "\n")
	}
	require.Len(t, cases, 76, "the cases of bad.txtar")
	return cases
}

func TestParseConfigBad(t *testing.T) {
	for _, tt := range configBadCases(t) {
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

func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing file", func(t *testing.T) {
		p := filepath.Join(dir, "missing.yaml")
		_, err := deployd.LoadConfig(p)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorIs(t, err, deployd.ErrConfigInvalid)
		assert.Equal(t, p+": cannot read: no such file or directory", err.Error())
	})
	t.Run("a directory", func(t *testing.T) {
		_, err := deployd.LoadConfig(dir)
		require.ErrorIs(t, err, deployd.ErrConfigInvalid)
		assert.Contains(t, err.Error(), dir+": cannot read: ")
	})
	t.Run("too large", func(t *testing.T) {
		p := filepath.Join(dir, "big.yaml")
		require.NoError(t, os.WriteFile(p, []byte(configBase+"# "+strings.Repeat("x", 1<<20)+"\n"), 0o600))
		_, err := deployd.LoadConfig(p)
		require.ErrorIs(t, err, deployd.ErrConfigInvalid)
		assert.Equal(t, p+": larger than 1048576 bytes", err.Error())
	})
	t.Run("names the path", func(t *testing.T) {
		p := filepath.Join(dir, "config.yaml")
		require.NoError(t, os.WriteFile(p, []byte(configBase+"tenancy2: {}\n"), 0o600))
		_, err := deployd.LoadConfig(p)
		assert.Equal(t, p+`:6: unknown key "tenancy2"`, err.Error())
	})
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
	for _, tt := range configBadCases(f) {
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

// TestLoadConfigRefusesWhatIsNotAFile: a config path that is a fifo (a blocking open
// would wait for a writer for ever) or a directory is refused at once, naming the
// path and what it is.
func TestLoadConfigRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, tc := range []struct{ path, kind string }{{fifo, "fifo"}, {dir, "directory"}} {
		done := make(chan error, 1)
		go func() {
			_, err := deployd.LoadConfig(tc.path)
			done <- err
		}()
		select {
		case err := <-done:
			require.Error(t, err)
			assert.ErrorIs(t, err, deployd.ErrConfigInvalid)
			assert.ErrorIs(t, err, fsutil.ErrNotRegular)
			assert.Equal(t, codes.ConfigInvalid, deployd.CodeOf(err))
			assert.Equal(t, tc.path+": cannot read: a "+tc.kind+", not a regular file", err.Error())
		case <-time.After(5 * time.Second):
			t.Fatalf("LoadConfig(%s) hangs on a %s", tc.path, tc.kind)
		}
	}
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
