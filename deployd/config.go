package deployd

// The agent's configuration: the Config type and its defaults (this file), the strict
// YAML decoder (config_decode.go) and the checks (config_validate.go).

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
)

// DefaultConfigPath is where the agent reads its config unless told otherwise.
const DefaultConfigPath = "/etc/monky-deployd/config.yaml"

// ErrConfigInvalid is matched (errors.Is) by every *ConfigError.
var ErrConfigInvalid = errors.New("invalid config")

// ConfigError is a problem with the agent's config: a parse error or a failed check. It
// names the file and line where known and always the key. Its code is CONFIG_INVALID; the
// agent exits 1 on it. Error texts never carry a URL or a secret.
type ConfigError struct {
	File string // the name given to ParseConfig, or the path given to LoadConfig
	Line int    // 1-based; 0 when unknown (a missing key, a Config built in code)
	Key  string // dotted key, e.g. "tenancy.url"; "" for file-level problems
	Msg  string // what is wrong; it names the key
	Err  error  // the underlying error, if any (a read error)
}

// Error returns "file:line: msg", leaving out what is unknown.
func (e *ConfigError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if loc == "" {
		return e.Msg
	}
	return loc + ": " + e.Msg
}

// Code returns codes.ConfigInvalid.
func (e *ConfigError) Code() codes.Code { return codes.ConfigInvalid }

// Unwrap returns the underlying error, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is reports whether target is ErrConfigInvalid.
func (e *ConfigError) Is(target error) bool { return target == ErrConfigInvalid }

// Duration is a time.Duration written in the config as a Go duration string ("30s",
// "5m").
type Duration time.Duration

// String returns the duration as time.Duration prints it.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Config is the agent's configuration (docs/OPERATIONS.md, "What is on a box" and "The config"). Build it with LoadConfig or
// ParseConfig, which start from DefaultConfig and validate; a Config built in code should
// start from DefaultConfig too and be checked with Validate. The zero Config is not valid.
type Config struct {
	// EnvID is the box's environment, env-<tier>-<nn> (e.g. env-prod-03). Required.
	EnvID string `yaml:"env_id"`
	// DeployDir holds releases/ and the current symlink. Default /srv/monky.
	DeployDir string `yaml:"deploy_dir"`
	// StateDir holds bao.token, state.json and the lock. Default /var/lib/monky-deployd.
	StateDir string `yaml:"state_dir"`
	// BootstrapGrant is the bootstrap grant file. Default /etc/monky-deployd/bootstrap.jwt.
	BootstrapGrant string `yaml:"bootstrap_grant"`
	// MinFreeMB is the free space (MiB) required under DeployDir before an apply.
	// Default 1024; 0 turns this floor off.
	MinFreeMB int64 `yaml:"min_free_mb"`
	// Tenancy says how to reach monky-tenancy.
	Tenancy TenancyConfig `yaml:"tenancy"`
	// Bao says how to reach OpenBao.
	Bao BaoConfig `yaml:"bao"`
	// Compose configures the docker compose wrapper.
	Compose ComposeConfig `yaml:"compose"`
	// TrustedKeys are the public keys (bundle.ParsePublicKey: "ed25519:<base64>")
	// whose signatures the box accepts (docs/BUNDLE.md, "Signatures"). With at least
	// one, every bundle must be signed by one of them for this env, sha and serial
	// before it is downloaded; empty (the default), signatures are not asked for.
	TrustedKeys []string `yaml:"trusted_keys"`
	// Holds configures holds: a person at the box asking the agent not to switch it
	// until a time (docs/OPERATIONS.md, "Holds and windows").
	Holds HoldsConfig `yaml:"holds"`
	// Windows are the times of the week in which an apply may switch the box; outside
	// them an apply is deferred (prepared, not switched). Empty (the default): at any
	// time.
	Windows []WindowConfig `yaml:"windows"`
}

// HoldsConfig configures holds.
type HoldsConfig struct {
	// Dir is the hold directory, writable by root and the hold group (the packages
	// create it, mode 2770 root:monky-hold); it holds hold.json and the agent's
	// deferred.json. Default /var/lib/monky-deployd-hold.
	Dir string `yaml:"dir"`
	// Max caps a hold's length: a longer one ends Max after it was set. Default 8h.
	Max Duration `yaml:"max"`
}

// WindowConfig is one apply window: on each of Days, from From to To (the next day
// when To is not after From), in TZ.
type WindowConfig struct {
	// Days are "mon-fri", "sat,sun", "daily", … (window.ParseDays). Required.
	Days string `yaml:"days"`
	// From and To are "HH:MM", 24-hour. Required.
	From string `yaml:"from"`
	To   string `yaml:"to"`
	// TZ is an IANA time zone ("Europe/Berlin"); "" is the box's own.
	TZ string `yaml:"tz"`
}

// TenancyConfig says how the agent reaches monky-tenancy.
type TenancyConfig struct {
	// Transport is sdk (dial the OpenZiti service in-process), proxy (through the local
	// tunneler's HTTP proxy) or system (the host's own network, e.g. a tunneler's DNS).
	// Default sdk.
	Transport string `yaml:"transport"`
	// URL is the base URL of the agent API; with sdk its host is the Host/SNI name.
	// Required: an http or https URL with a host and without credentials.
	URL string `yaml:"url"`
	// Service is the OpenZiti service to dial (sdk). Default monky-tenancy.
	Service string `yaml:"service"`
	// Identity is the box's OpenZiti identity file (sdk). Default
	// /etc/monky-deployd/identity.json.
	Identity string `yaml:"identity"`
	// Proxy is the local tunneler's proxy URL (proxy transport): http, https, socks5 or
	// socks5h. No default.
	Proxy string `yaml:"proxy"`
	// CAFile is an extra CA bundle for TLS; absolute if set. Default none.
	CAFile string `yaml:"ca_file"`
	// ServerName overrides the TLS SNI and verification name. Default none.
	ServerName string `yaml:"server_name"`
	// Timeout bounds each call. Default 30s.
	Timeout Duration `yaml:"timeout"`
}

// BaoConfig says how the agent reaches OpenBao.
type BaoConfig struct {
	// Addr is OpenBao's address. Required: an http or https URL with a host.
	Addr string `yaml:"addr"`
	// AuthMount is the JWT auth mount. Default jwt-tenancy.
	AuthMount string `yaml:"auth_mount"`
	// Role is the JWT role. Default see-env.
	Role string `yaml:"role"`
	// KVMount is the KV v2 mount that holds secret/data/envs/<env_id>/. Default secret.
	KVMount string `yaml:"kv_mount"`
	// Namespace is the OpenBao namespace. Default none.
	Namespace string `yaml:"namespace"`
	// CAFile is an extra CA bundle for TLS; absolute if set. Default none.
	CAFile string `yaml:"ca_file"`
}

// ComposeConfig configures the docker compose wrapper.
type ComposeConfig struct {
	// Project is the compose project name. Default monky.
	Project string `yaml:"project"`
	// Docker is the docker CLI: a command looked up on PATH or an absolute path.
	// Default docker.
	Docker string `yaml:"docker"`
	// HealthTimeout bounds the wait for healthy services after up. Default 5m.
	HealthTimeout Duration `yaml:"health_timeout"`
	// KeepReleases is how many releases are kept; at least 1. Default 3.
	KeepReleases int `yaml:"keep_releases"`
	// AllowPrivileged names the services that may be privileged on this box. Default none.
	AllowPrivileged []string `yaml:"allow_privileged"`
}

// DefaultConfig returns a Config holding every default, the one place they are
// written (the table in docs/OPERATIONS.md, "The config", lists them). EnvID,
// Tenancy.URL and Bao.Addr have no default, so the result is not valid until they are
// set. ParseConfig starts from it and overwrites the keys a file sets; a Config built
// in code (a test, an embedding program) starts from it too, sets fields and calls
// Validate.
func DefaultConfig() Config {
	return Config{
		DeployDir:      "/srv/monky",
		StateDir:       "/var/lib/monky-deployd",
		BootstrapGrant: "/etc/monky-deployd/bootstrap.jwt",
		MinFreeMB:      1024,
		Tenancy: TenancyConfig{
			Transport: "sdk",
			Service:   "monky-tenancy",
			Identity:  "/etc/monky-deployd/identity.json",
			Timeout:   Duration(30 * time.Second),
		},
		Bao: BaoConfig{
			AuthMount: bao.DefaultAuthMount,
			Role:      bao.DefaultRole,
			KVMount:   bao.DefaultKVMount,
		},
		Compose: ComposeConfig{
			Project:       "monky",
			Docker:        "docker",
			HealthTimeout: Duration(5 * time.Minute),
			KeepReleases:  3,
		},
		Holds: HoldsConfig{
			Dir: "/var/lib/monky-deployd-hold",
			Max: Duration(8 * time.Hour),
		},
	}
}

// TokenPath is the OpenBao token file: <state_dir>/bao.token.
func (c Config) TokenPath() string { return filepath.Join(c.StateDir, "bao.token") }

// StatePath is the agent's state file: <state_dir>/state.json.
func (c Config) StatePath() string { return filepath.Join(c.StateDir, "state.json") }

// KeepPath holds what of the state must survive a state.json that does not parse
// (the replay ratchet, the failed shas, the latch): <state_dir>/state.keep.json.
func (c Config) KeepPath() string { return filepath.Join(c.StateDir, "state.keep.json") }

// PreparedDir keeps the verified bundle of a deferred apply, so that the switch does
// not download it again: <deploy_dir>/prepared.
func (c Config) PreparedDir() string { return filepath.Join(c.DeployDir, "prepared") }

// LockPath is the run lock: <state_dir>/lock.
func (c Config) LockPath() string { return filepath.Join(c.StateDir, "lock") }

// ReleasesDir holds one directory per release: <deploy_dir>/releases.
func (c Config) ReleasesDir() string { return filepath.Join(c.DeployDir, "releases") }

// CurrentLink is the symlink to the live release: <deploy_dir>/current.
func (c Config) CurrentLink() string { return filepath.Join(c.DeployDir, "current") }

// Tier returns the tier of the environment, "prod" for env-prod-03, or "" when EnvID is
// not a valid env_id.
func (c Config) Tier() string {
	if !ids.ValidEnvID(c.EnvID) {
		return ""
	}
	s := strings.TrimPrefix(c.EnvID, "env-")
	return s[:strings.LastIndexByte(s, '-')]
}
