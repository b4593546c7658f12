package deployd

import "github.com/monky/monky-deployd/internal/config"

// The config lives in internal/config so that the timer's idle tick
// (cmd/monky-deployd-tick) reads it without linking the rest of the agent; these names
// are its public face.

// DefaultConfigPath is where the agent reads its config unless told otherwise.
const DefaultConfigPath = config.DefaultConfigPath

// ErrConfigInvalid is matched (errors.Is) by every *ConfigError.
var ErrConfigInvalid = config.ErrConfigInvalid

// ConfigError is a problem with the agent's config: a parse error or a failed check. It
// names the file and line where known and always the key. Its code is CONFIG_INVALID; the
// agent exits 1 on it. Error texts never carry a URL or a secret.
type ConfigError = config.ConfigError

// Duration is a time.Duration written in the config as a Go duration string ("30s",
// "5m").
type Duration = config.Duration

// Config is the agent's configuration (docs/OPERATIONS.md, "What is on a box" and "The
// config"). Build it with LoadConfig or ParseConfig, which start from DefaultConfig and
// validate; a Config built in code should start from DefaultConfig too and be checked
// with Validate. The zero Config is not valid. It is defined in internal/config, whose
// fields (with their YAML keys and defaults) are documented there and in
// docs/OPERATIONS.md, "The config".
type Config = config.Config

// TenancyConfig says how the agent reaches monky-tenancy.
type TenancyConfig = config.TenancyConfig

// BaoConfig says how the agent reaches OpenBao.
type BaoConfig = config.BaoConfig

// ComposeConfig configures the docker compose wrapper.
type ComposeConfig = config.ComposeConfig

// DefaultConfig returns a Config holding every default, the one place they are written
// (the table in docs/OPERATIONS.md, "The config", lists them). EnvID, Tenancy.URL and
// Bao.Addr have no default, so the result is not valid until they are set.
func DefaultConfig() Config { return config.DefaultConfig() }

// LoadConfig reads and validates the config file at path. Errors name path.
func LoadConfig(path string) (Config, error) { return config.LoadConfig(path) }

// ParseConfig parses and validates a config. name is used in error messages (the file
// name); every problem found is reported, each naming its key and line.
func ParseConfig(name string, data []byte) (Config, error) { return config.ParseConfig(name, data) }
