package deployd

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/window"
)

// This file checks a config's values: Validate, and the same checks with the lines of
// the keys for ParseConfig.

var (
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
	v.tenancy(c.Tenancy)
	v.bao(c.Bao)
	v.compose(c.Compose)
	v.trustedKeys(c.TrustedKeys)
	v.holds(c.Holds)
	v.windows(c.Windows)
	return errors.Join(v.errs...)
}

// tenancy checks the tenancy block.
func (v *cfgValidator) tenancy(t TenancyConfig) {
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
}

// bao checks the bao block.
func (v *cfgValidator) bao(b BaoConfig) {
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
}

// compose checks the compose block.
func (v *cfgValidator) compose(k ComposeConfig) {
	if !compose.ValidProjectName(k.Project) {
		v.fail("compose.project", "%q is not a compose project name (%s)", k.Project, compose.ProjectNamePattern)
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
}

// trustedKeys checks every trusted key (bundle.ParsePublicKey) and returns the ring
// of the valid ones. An error names the item by its position and the key by its id,
// never by its text.
func (v *cfgValidator) trustedKeys(texts []string) bundle.KeyRing {
	const key = "trusted_keys"
	keys := make([]bundle.PublicKey, 0, len(texts))
	seen := map[bundle.KeyID]int{}
	for i, s := range texts {
		k, err := bundle.ParsePublicKey(s)
		if err != nil {
			v.fail(key, "item %d: %v", i+1, err)
			continue
		}
		if j, ok := seen[k.ID]; ok {
			v.fail(key, "item %d: key %s is listed twice (item %d)", i+1, k.ID, j)
			continue
		}
		seen[k.ID] = i + 1
		keys = append(keys, k)
	}
	ring, err := bundle.NewKeyRing(keys...)
	if err != nil { // ParsePublicKey's keys always make a ring
		v.fail(key, "%v", err)
	}
	return ring
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

// KeyRing returns the trusted keys as a bundle.KeyRing; an empty ring when there are
// none (signatures not required). An invalid key is the *ConfigError Validate
// returns for it.
func (c Config) KeyRing() (bundle.KeyRing, error) {
	v := &cfgValidator{}
	ring := v.trustedKeys(c.TrustedKeys)
	if err := errors.Join(v.errs...); err != nil {
		return bundle.KeyRing{}, err
	}
	return ring, nil
}

// maxWindows bounds the windows of a config.
const maxWindows = 32

// minHoldMax is the shortest holds.max: a cap below a minute is a typo.
const minHoldMax = time.Minute

// holds checks the holds block.
func (v *cfgValidator) holds(h HoldsConfig) {
	v.absPath("holds.dir", h.Dir, true)
	if time.Duration(h.Max) < minHoldMax {
		v.fail("holds.max", "must be at least %s, got %s", minHoldMax, h.Max)
	}
}

// windows checks every window.
func (v *cfgValidator) windows(ws []WindowConfig) {
	if len(ws) > maxWindows {
		v.fail("windows", "at most %d windows, got %d", maxWindows, len(ws))
		return
	}
	for i, w := range ws {
		key := fmt.Sprintf("windows[%d]", i+1)
		if _, err := w.parse(); err != nil {
			v.fail(key, "%v", err)
		}
	}
}

// parse is w as a window.Window, in the box's zone when it names none.
func (w WindowConfig) parse() (window.Window, error) {
	if w.Days == "" || w.From == "" || w.To == "" {
		return window.Window{}, errors.New("days, from and to are required")
	}
	return window.Parse(w.Days, w.From, w.To, w.TZ, time.Local)
}

// windowSet is the config's windows; the empty set (no windows) is always open. A
// window that does not parse was refused by Validate; it is left out here.
func (c Config) windowSet() window.Set {
	set := make(window.Set, 0, len(c.Windows))
	for _, w := range c.Windows {
		if pw, err := w.parse(); err == nil {
			set = append(set, pw)
		}
	}
	return set
}
