package deployd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
)

// DefaultConfigPath is where the agent reads its config unless told otherwise.
const DefaultConfigPath = "/etc/monky-deployd/config.yaml"

// maxConfigSize bounds the config file; a larger file is refused.
const maxConfigSize = 1 << 20

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

// Config is the agent's configuration (SPEC §3 and §4). Build it with LoadConfig or
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

// DefaultConfig returns the defaults of SPEC §3 and §4. EnvID, Tenancy.URL and Bao.Addr
// have no default.
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
			AuthMount: "jwt-tenancy",
			Role:      "see-env",
			KVMount:   "secret",
		},
		Compose: ComposeConfig{
			Project:       "monky",
			Docker:        "docker",
			HealthTimeout: Duration(5 * time.Minute),
			KeepReleases:  3,
		},
	}
}

// TokenPath is the OpenBao token file: <state_dir>/bao.token.
func (c Config) TokenPath() string { return filepath.Join(c.StateDir, "bao.token") }

// StatePath is the agent's state file: <state_dir>/state.json.
func (c Config) StatePath() string { return filepath.Join(c.StateDir, "state.json") }

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

// LoadConfig reads and validates the config file at path. Errors name path.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, &ConfigError{File: path, Msg: "cannot read: " + pathErrText(err), Err: err}
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return Config{}, &ConfigError{File: path, Msg: "cannot read: " + pathErrText(err), Err: err}
	}
	return ParseConfig(path, data)
}

// pathErrText returns the text of err without the path a *fs.PathError repeats.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ParseConfig parses and validates a config. name is used in error messages (the file
// name). Every problem found is returned, joined with errors.Join; each is a
// *ConfigError.
//
// The config is read strictly:
//
//   - an unknown key, a duplicate key, a value of the wrong type, a second YAML document,
//     an empty file and a top level that is not a mapping are errors that name the file,
//     the line and the key (`config.yaml:7: unknown key "tenancy.proxxy"`);
//   - a key that is absent, or present with a null value (`ca_file:`), keeps its default;
//     an explicit value, "" or 0 included, is taken as written and validated;
//   - strings must be YAML strings: `role: 5` is a type error (quote it: `role: "5"`);
//     durations are Go duration strings ("30s", "5m"); a bare number is a type error,
//     because "timeout: 30" is ambiguous;
//   - anchors and aliases are followed; merge keys (<<) are unknown keys;
//   - URLs (tenancy.url, tenancy.proxy, bao.addr) must not carry credentials: the config
//     file is not a secret store and error messages never echo a URL;
//   - tenancy.identity and tenancy.service are checked only with transport sdk,
//     tenancy.proxy only with transport proxy; with another transport they are ignored,
//     so that one ansible template can write all of them;
//   - min_free_mb 0 turns the config's free-space floor off (the manifest's floor and twice
//     the unpacked size still apply); a negative value is an error.
//
// Validation errors carry the line of the key when the Config came from a file.
func ParseConfig(name string, data []byte) (Config, error) {
	if len(data) > maxConfigSize {
		return Config{}, &ConfigError{File: name, Msg: fmt.Sprintf("larger than %d bytes", maxConfigSize)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, &ConfigError{File: name, Msg: "empty config"}
		}
		return Config{}, yamlSyntaxError(name, err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		line := second.Line
		if err != nil {
			return Config{}, yamlSyntaxError(name, err)
		}
		return Config{}, &ConfigError{File: name, Line: line, Msg: "more than one YAML document"}
	}
	if len(doc.Content) == 0 {
		return Config{}, &ConfigError{File: name, Msg: "empty config"}
	}
	root := resolveAlias(doc.Content[0])
	if root.ShortTag() == "!!null" {
		return Config{}, &ConfigError{File: name, Msg: "empty config"}
	}
	if root.Kind != yaml.MappingNode {
		return Config{}, &ConfigError{File: name, Line: root.Line, Msg: "want a mapping of keys at the top, got " + nodeKind(root)}
	}

	c := DefaultConfig()
	p := &cfgParser{file: name, lines: map[string]int{}}
	p.mapping(root, reflect.ValueOf(&c).Elem(), "")
	if len(p.errs) > 0 {
		return Config{}, errors.Join(p.errs...)
	}
	if err := c.validate(name, p.lines); err != nil {
		return Config{}, err
	}
	return c, nil
}

// yamlLineRE finds the line in a yaml.v3 syntax error.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlSyntaxError(name string, err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &ConfigError{File: name, Line: line, Msg: "YAML syntax: " + m[2], Err: err}
	}
	return &ConfigError{File: name, Msg: "YAML syntax: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
}

// cfgParser walks the YAML node tree into a Config, collecting every error.
type cfgParser struct {
	file  string
	lines map[string]int
	errs  []error
}

func (p *cfgParser) fail(line int, key, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// durationType is decoded from a duration string.
var durationType = reflect.TypeFor[Duration]()

// mapping decodes the mapping n into the struct v; prefix is the dotted key of v
// ("" or "tenancy.").
func (p *cfgParser) mapping(n *yaml.Node, v reflect.Value, prefix string) {
	fields := map[string]int{}
	for i := range v.NumField() {
		if tag := v.Type().Field(i).Tag.Get("yaml"); tag != "" {
			fields[tag] = i
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.fail(k.Line, prefix, "want a plain key in %s, got %s", sectionName(prefix), nodeKind(k))
			continue
		}
		key := prefix + k.Value
		if first, dup := seen[k.Value]; dup {
			p.fail(k.Line, key, "duplicate key %q (first at line %d)", key, first)
			continue
		}
		seen[k.Value] = k.Line
		idx, ok := fields[k.Value]
		if !ok || k.ShortTag() == "!!merge" {
			p.fail(k.Line, key, "unknown key %q", key)
			continue
		}
		p.lines[key] = k.Line
		p.value(val, v.Field(idx), key)
	}
}

// sectionName names a section for messages: "the top level" or `"tenancy"`.
func sectionName(prefix string) string {
	if prefix == "" {
		return "the top level"
	}
	return strconv.Quote(strings.TrimSuffix(prefix, "."))
}

// value decodes n into f, the field for key. A null value keeps the default.
func (p *cfgParser) value(n *yaml.Node, f reflect.Value, key string) {
	n = resolveAlias(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	switch {
	case f.Type() == durationType:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			p.fail(n.Line, key, `key %q: want a duration such as "30s", got %s`, key, nodeKind(n))
			return
		}
		d, err := time.ParseDuration(n.Value)
		if err != nil {
			p.fail(n.Line, key, `key %q: want a duration such as "30s", got %q`, key, n.Value)
			return
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			p.fail(n.Line, key, "key %q: want a string, got %s", key, nodeKind(n))
			return
		}
		f.SetString(n.Value)
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || f.OverflowInt(i) {
			p.fail(n.Line, key, "key %q: want an integer, got %s", key, nodeKind(n))
			return
		}
		f.SetInt(i)
	case f.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			p.fail(n.Line, key, "key %q: want a list of strings, got %s", key, nodeKind(n))
			return
		}
		list := make([]string, 0, len(n.Content))
		for i, item := range n.Content {
			item = resolveAlias(item)
			if item.Kind != yaml.ScalarNode || item.ShortTag() != "!!str" {
				p.fail(item.Line, key, "key %q: item %d: want a string, got %s", key, i+1, nodeKind(item))
				continue
			}
			list = append(list, item.Value)
		}
		if len(list) > 0 { // "[]" and an absent key both leave the list nil
			f.Set(reflect.ValueOf(list))
		}
	case f.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			p.fail(n.Line, key, "key %q: want a mapping, got %s", key, nodeKind(n))
			return
		}
		p.mapping(n, f, key+".")
	default:
		panic("deployd: config field of unsupported type " + f.Type().String())
	}
}

// resolveAlias follows an alias to its anchor.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// nodeKind describes a node for messages without quoting its value.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		case "!!timestamp":
			return "a timestamp"
		default:
			return "a value tagged " + n.ShortTag()
		}
	default:
		return "an unsupported YAML node"
	}
}

var (
	projectRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	serviceNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	mountRE       = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*$`)
)

// Validate checks every field and returns all problems, joined with errors.Join; each is
// a *ConfigError that names its key. ParseConfig runs the same checks and adds the file
// and line of each key.
func (c *Config) Validate() error { return c.validate("", nil) }

// validate is Validate with the file name and the lines of the keys, when known.
func (c *Config) validate(file string, lines map[string]int) error {
	v := &cfgValidator{file: file, lines: lines}
	if c.EnvID == "" {
		v.fail("env_id", "required")
	} else if !ids.ValidEnvID(c.EnvID) {
		v.fail("env_id", "%q does not match %s", c.EnvID, ids.EnvIDPattern)
	}
	v.absPath("deploy_dir", c.DeployDir, true)
	v.absPath("state_dir", c.StateDir, true)
	v.absPath("bootstrap_grant", c.BootstrapGrant, true)
	if c.MinFreeMB < 0 {
		v.fail("min_free_mb", "must not be negative, got %d", c.MinFreeMB)
	}

	t := c.Tenancy
	switch t.Transport {
	case "sdk":
		if t.Service == "" {
			v.fail("tenancy.service", "required with transport sdk")
		}
		v.absPath("tenancy.identity", t.Identity, true)
	case "proxy":
		if t.Proxy == "" {
			v.fail("tenancy.proxy", "required with transport proxy")
		} else {
			v.url("tenancy.proxy", t.Proxy, "http", "https", "socks5", "socks5h")
		}
	case "system":
	case "":
		v.fail("tenancy.transport", "required: sdk, proxy or system")
	default:
		v.fail("tenancy.transport", "want sdk, proxy or system, got %q", t.Transport)
	}
	if t.URL == "" {
		v.fail("tenancy.url", "required")
	} else {
		v.url("tenancy.url", t.URL, "http", "https")
	}
	v.absPath("tenancy.ca_file", t.CAFile, false)
	if strings.ContainsAny(t.ServerName, " /:@") {
		v.fail("tenancy.server_name", "want a host name, got %q", t.ServerName)
	}
	v.positive("tenancy.timeout", t.Timeout)

	b := c.Bao
	if b.Addr == "" {
		v.fail("bao.addr", "required")
	} else {
		v.url("bao.addr", b.Addr, "http", "https")
	}
	v.mount("bao.auth_mount", b.AuthMount, true)
	if b.Role == "" {
		v.fail("bao.role", "required")
	} else if strings.ContainsAny(b.Role, "/ ") {
		v.fail("bao.role", "want a role name without slashes or spaces, got %q", b.Role)
	}
	v.mount("bao.kv_mount", b.KVMount, true)
	v.mount("bao.namespace", b.Namespace, false)
	v.absPath("bao.ca_file", b.CAFile, false)

	k := c.Compose
	if !projectRE.MatchString(k.Project) {
		v.fail("compose.project", "%q is not a compose project name (%s)", k.Project, projectRE)
	}
	switch {
	case k.Docker == "":
		v.fail("compose.docker", "required")
	case strings.ContainsRune(k.Docker, '/') && !filepath.IsAbs(k.Docker):
		v.fail("compose.docker", "want a command name or an absolute path, got %q", k.Docker)
	}
	v.positive("compose.health_timeout", k.HealthTimeout)
	if k.KeepReleases < 1 {
		v.fail("compose.keep_releases", "must be at least 1, got %d", k.KeepReleases)
	}
	seen := map[string]bool{}
	for _, s := range k.AllowPrivileged {
		switch {
		case !serviceNameRE.MatchString(s):
			v.fail("compose.allow_privileged", "%q is not a valid service name", s)
		case seen[s]:
			v.fail("compose.allow_privileged", "%q is listed twice", s)
		}
		seen[s] = true
	}
	return errors.Join(v.errs...)
}

// cfgValidator collects validation errors with their lines.
type cfgValidator struct {
	file  string
	lines map[string]int
	errs  []error
}

func (v *cfgValidator) fail(key, format string, args ...any) {
	v.errs = append(v.errs, &ConfigError{
		File: v.file, Line: v.lines[key], Key: key,
		Msg: fmt.Sprintf("key %q: ", key) + fmt.Sprintf(format, args...),
	})
}

func (v *cfgValidator) absPath(key, p string, required bool) {
	switch {
	case p == "" && required:
		v.fail(key, "required")
	case p != "" && !filepath.IsAbs(p):
		v.fail(key, "want an absolute path, got %q", p)
	case strings.ContainsRune(p, 0):
		v.fail(key, "contains a NUL byte")
	}
}

func (v *cfgValidator) positive(key string, d Duration) {
	if d <= 0 {
		v.fail(key, "must be positive, got %s", d)
	}
}

// url checks an absolute URL with one of schemes and a host, without credentials,
// query or fragment. The value is never echoed: a URL may carry a password.
func (v *cfgValidator) url(key, raw string, schemes ...string) {
	u, err := url.Parse(raw)
	want := "want an absolute " + strings.Join(schemes, "/") + " URL with a host"
	switch {
	case err != nil || u.Host == "" || u.Hostname() == "" || u.Opaque != "":
		v.fail(key, "%s", want)
	case !slices.Contains(schemes, u.Scheme):
		v.fail(key, "%s, got scheme %q", want, u.Scheme)
	case u.User != nil:
		v.fail(key, "must not carry credentials (user:password@); keep secrets out of the config")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		v.fail(key, "must not have a query or a fragment")
	}
}

// mount checks an OpenBao mount path or namespace: slash-separated segments of letters,
// digits, '_', '-', '.', no "." or ".." segment, no leading or trailing slash.
func (v *cfgValidator) mount(key, m string, required bool) {
	switch {
	case m == "":
		if required {
			v.fail(key, "required")
		}
	case !mountRE.MatchString(m) || path.Clean(m) != m:
		v.fail(key, "want a mount path such as \"secret\" (no leading or trailing slash, no . or .. segments), got %q", m)
	}
}
