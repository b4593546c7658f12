package bundle

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/composecheck"
)

// SchemaHooks is the manifest schema that may carry hooks and restore (docs/BUNDLE.md,
// "Hooks"): an agent that knows only schema 1 refuses such a manifest before its lease.
const SchemaHooks = 2

// HookProfile is the compose profile every hook service is behind, so that `docker
// compose up` never starts it and the health wait never waits for it; the agent runs
// a hook with `docker compose --profile monky-hooks run --rm --no-deps -T`.
const HookProfile = "monky-hooks"

// Restore values of the manifest (Manifest.Restore).
const (
	// RestoreSafe: a failure after the switch restores the previous release (the
	// default, "" reads as it).
	RestoreSafe = "safe"
	// RestoreUnsafe: the release changes data the previous release cannot read (a
	// migration): a failure after the switch is not restored; the box keeps the failed
	// release and a person decides.
	RestoreUnsafe = "unsafe"
)

// Hook timeouts: the default when the manifest says none, and the largest allowed.
const (
	DefaultHookTimeout = 5 * time.Minute
	MaxHookTimeout     = time.Hour
)

// Hooks are the one-shot services a release runs around the switch.
type Hooks struct {
	// BeforeSwitch run after the lease and the secrets, from the staged release,
	// before anything live changes, in order.
	BeforeSwitch []Hook `json:"before_switch,omitempty"`
	// AfterSwitch run once every service is healthy, in order; a failure counts as
	// unhealthy.
	AfterSwitch []Hook `json:"after_switch,omitempty"`
}

// Hook is one hook: a compose service behind the monky-hooks profile.
type Hook struct {
	// Service is the compose service run.
	Service string `json:"service"`
	// TimeoutSeconds bounds the run; 0 is DefaultHookTimeout.
	TimeoutSeconds int `json:"timeout_s,omitempty"`
	// Repeatable says that running the hook again after a crash interrupted it is
	// safe; otherwise an interrupted hook is HOOK_INTERRUPTED and a person decides.
	Repeatable bool `json:"repeatable,omitempty"`
}

// Timeout is the hook's bound.
func (h Hook) Timeout() time.Duration {
	if h.TimeoutSeconds == 0 {
		return DefaultHookTimeout
	}
	return time.Duration(h.TimeoutSeconds) * time.Second
}

// RestoreUnsafe reports whether the manifest says that restoring the previous release
// after this one switched is unsafe.
func (m *Manifest) RestoreUnsafe() bool { return m.Restore == RestoreUnsafe }

// AllHooks are the manifest's hooks, before the switch then after it.
func (m *Manifest) AllHooks() []Hook {
	if m.Hooks == nil {
		return nil
	}
	return slices.Concat(m.Hooks.BeforeSwitch, m.Hooks.AfterSwitch)
}

var hooksFields = map[string]bool{"before_switch": false, "after_switch": false}

var hookFields = map[string]bool{"service": true, "timeout_s": false, "repeatable": false}

// serviceNameRE is compose's rule for a service name.
var serviceNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// checkHooksKeys checks the keys of the hooks object strictly, as checkJSONKeys does
// the manifest's.
func checkHooksKeys(dec *json.Decoder) error {
	return walkObject(dec, "hooks", func(phase string) error {
		if _, ok := hooksFields[phase]; !ok {
			return fmt.Errorf("unknown field %q", "hooks."+phase)
		}
		return walkArray(dec, "hooks."+phase, func(i int) error {
			field := fmt.Sprintf("hooks.%s[%d]", phase, i)
			seen := map[string]bool{}
			if err := walkObject(dec, field, func(key string) error {
				if _, ok := hookFields[key]; !ok {
					return fmt.Errorf("unknown field %q", field+"."+key)
				}
				seen[key] = true
				return skipValue(dec)
			}); err != nil {
				return err
			}
			if !seen["service"] {
				return fmt.Errorf("field %q is missing", field+".service")
			}
			return nil
		})
	})
}

// walkArray reads an array (or null) and calls each for every element, with the
// decoder positioned at it.
func walkArray(dec *json.Decoder, field string, each func(i int) error) error {
	if open, err := openValue(dec, field, '[', "an array"); !open || err != nil {
		return err
	}
	for i := 0; dec.More(); i++ {
		if err := each(i); err != nil {
			return err
		}
	}
	_, err := dec.Token() // ']'
	return err
}

// checkHooks adds the refusals of the manifest's restore and hooks on their own: the
// schema they need, the restore value, service names, timeouts, a service twice.
func (m *Manifest) checkHooks(rs *refusals) {
	if m.Schema < SchemaHooks && (m.Hooks != nil || m.Restore != "") {
		rs.add(codes.BundleMalformed, "%s: hooks and restore need schema %d, the manifest says %d", ManifestName, SchemaHooks, m.Schema)
	}
	switch m.Restore {
	case "", RestoreSafe, RestoreUnsafe:
	default:
		rs.add(codes.BundleMalformed, "%s: restore must be %q or %q", ManifestName, RestoreSafe, RestoreUnsafe)
	}
	if m.Hooks == nil {
		return
	}
	seen := map[string]bool{}
	for _, ph := range []struct {
		name  string
		hooks []Hook
	}{{"before_switch", m.Hooks.BeforeSwitch}, {"after_switch", m.Hooks.AfterSwitch}} {
		for i, h := range ph.hooks {
			where := fmt.Sprintf("hooks.%s[%d]", ph.name, i)
			switch {
			case !serviceNameRE.MatchString(h.Service):
				rs.add(codes.HookInvalid, "%s: service is not a compose service name", where)
				continue
			case seen[h.Service]:
				rs.add(codes.HookInvalid, "%s: service %s is a hook twice", where, h.Service)
			}
			seen[h.Service] = true
			if h.TimeoutSeconds < 0 || time.Duration(h.TimeoutSeconds)*time.Second > MaxHookTimeout {
				rs.add(codes.HookInvalid, "%s: service %s: timeout_s is %d, must be 0 (the default, %s) to %d",
					where, h.Service, h.TimeoutSeconds, DefaultHookTimeout, int(MaxHookTimeout/time.Second))
			}
		}
	}
}

// checkHookServices refuses (HOOK_INVALID) hooks whose service the compose files do
// not define, that is not one-shot, or that `docker compose up` would start (not
// behind the monky-hooks profile). every is the loaded model's services.
func checkHookServices(m *Manifest, every []composecheck.ServiceInfo, rs *refusals) {
	byName := map[string]composecheck.ServiceInfo{}
	for _, s := range every {
		byName[s.Name] = s
	}
	for _, h := range m.AllHooks() {
		s, ok := byName[h.Service]
		switch {
		case !ok:
			rs.add(codes.HookInvalid, "hook service %s is not a service of the compose files", h.Service)
		case !s.OneShot():
			rs.add(codes.HookInvalid, "hook service %s has restart %s: a hook must end by itself (remove restart, or use \"no\" or on-failure)", h.Service, s.Restart)
		case !slices.Contains(s.Profiles, HookProfile):
			rs.add(codes.HookInvalid, "hook service %s is not behind the %s profile (profiles: [%s]), so docker compose up would start it with the release",
				h.Service, HookProfile, HookProfile)
		}
	}

}
