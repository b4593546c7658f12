package composecheck

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/monky/monky-deployd/deployd/codes"
)

// scanProject runs the privilege scan and the env_file/label_file checks on the loaded,
// normalised model: every service and job, active or behind a profile, and every
// pre_start hook, so that short and long syntax, relative paths and the merge of
// several compose files are all judged the same way.
func (c *checker) scanProject(p *types.Project) {
	allowed := map[string]bool{}
	for _, s := range c.in.AllowPrivileged {
		allowed[s] = true
	}
	names, services := everyByName(p.Services, p.DisabledServices)
	for _, name := range names {
		s := services[name]
		where := "service " + name
		c.checkFiles(where, s.EnvFiles, s.LabelFiles)
		for i, h := range s.PreStart {
			c.checkFiles(fmt.Sprintf("%s: pre_start[%d]", where, i), h.EnvFiles, h.LabelFiles)
		}
		if allowed[name] {
			continue
		}
		sc := &scanner{c: c, p: p, where: where}
		sc.container(&s.ContainerSpec)
		sc.build(s.Build)
		for i := range s.PreStart {
			sub := &scanner{c: c, p: p, where: fmt.Sprintf("%s: pre_start[%d]", where, i)}
			sub.container(&s.PreStart[i].ContainerSpec)
		}
		for _, hooks := range []struct {
			key   string
			hooks []types.ServiceHook
		}{{"post_start", s.PostStart}, {"pre_stop", s.PreStop}} {
			for i, h := range hooks.hooks {
				if h.Privileged {
					sc.add("%s[%d].privileged is true", hooks.key, i)
				}
			}
		}
		if s.Net == "host" {
			sc.add("net host shares the host network")
		}
		if s.Provider != nil {
			sc.add("provider runs a program on the host")
		}
		if s.Deploy != nil && s.Deploy.Resources.Reservations != nil && len(s.Deploy.Resources.Reservations.Devices) > 0 {
			sc.add("deploy.resources.reservations.devices requests host devices")
		}
	}

	names, jobs := everyByName(p.Jobs, p.DisabledJobs)
	for _, name := range names {
		j := jobs[name]
		where := "job " + name
		c.checkFiles(where, j.EnvFiles, j.LabelFiles)
		if allowed[name] {
			continue
		}
		sc := &scanner{c: c, p: p, where: where}
		sc.container(&j.ContainerSpec)
		sc.build(j.Build)
	}
}

// everyByName gathers the active entries of a kind (services, jobs) and those behind a
// profile, which the scan judges alike, and returns them with their names in order.
func everyByName[V any](active, disabled map[string]V) ([]string, map[string]V) {
	all := make(map[string]V, len(active)+len(disabled))
	maps.Copy(all, active)
	maps.Copy(all, disabled)
	return slices.Sorted(maps.Keys(all)), all
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// inDir returns the path of abs relative to the load directory dir and whether it is
// inside it. A first segment starting with "~" counts as outside: compose-go expands
// "~" from $HOME, and leaves it relative only when HOME is unset.
func inDir(dir, abs string) (string, bool) {
	if abs == "" || !strings.HasPrefix(abs, "/") {
		return "", false
	}
	clean := path.Clean(abs)
	if clean == dir {
		return ".", true
	}
	rel, ok := strings.CutPrefix(clean, dir+"/")
	if !ok || strings.HasPrefix(rel, "~") {
		return "", false
	}
	return rel, true
}

// renderedEnv is the .env file the agent renders into every release; a service may
// name it as its env_file although it is not a bundle file.
const renderedEnv = ".env"

// checkFiles checks that env_file and label_file entries are bundle files (MANIFEST_PATHS)
// and that env files parse (COMPOSE_INVALID). They apply to allowlisted services too.
func (c *checker) checkFiles(where string, envFiles []types.EnvFile, labelFiles []string) {
	listed := map[string]bool{}
	for _, f := range c.in.BundleFiles {
		listed[f] = true
	}
	for i, ef := range envFiles {
		rel, ok := c.inRelease(ef.Path)
		switch {
		case !ok:
			c.add(codes.ManifestPaths, "%s: env_file[%d] is outside the release", where, i)
		case rel == renderedEnv:
			// The agent's own rendered .env.
		case !listed[rel]:
			c.add(codes.ManifestPaths, "%s: env_file %s is not a file of the bundle", where, rel)
		default:
			if content, ok := c.in.Files[rel]; ok && ef.Format == "" {
				// Syntax only: every variable reads as set, so nothing is logged or required.
				_, err := dotenv.UnmarshalBytesWithLookup(content, func(string) (string, bool) { return "x", true })
				if err != nil {
					c.add(codes.ComposeInvalid, "%s: env_file %s is not a valid env file", where, rel)
				}
			}
		}
	}
	for i, lf := range labelFiles {
		rel, ok := c.inRelease(lf)
		switch {
		case !ok:
			c.add(codes.ManifestPaths, "%s: label_file[%d] is outside the release", where, i)
		case !listed[rel]:
			c.add(codes.ManifestPaths, "%s: label_file %s is not a file of the bundle", where, rel)
		}
	}
}

type scanner struct {
	c     *checker
	p     *types.Project
	where string
}

func (s *scanner) add(format string, args ...any) {
	s.c.add(codes.Privileged, "%s: %s", s.where, fmt.Sprintf(format, args...))
}

// fromSecret adds a finding when value holds a secret's placeholder: the value OpenBao
// returns at apply time would decide a setting that the scan judges, and it is
// unknown now. key names the setting, never the value.
func (s *scanner) fromSecret(key string, values ...string) bool {
	for _, v := range values {
		if strings.Contains(v, secretPlaceholder) {
			s.add("%s is set from a secret variable; a setting the privilege scan judges must not depend on a secret's value", key)
			return true
		}
	}
	return false
}

var capRE = regexp.MustCompile(`^[A-Za-z_]{1,64}$`)

// container scans the attributes shared by services, jobs and pre_start hooks.
func (s *scanner) container(cs *types.ContainerSpec) {
	if cs.Privileged {
		s.add("privileged is true")
	}
	for _, capName := range cs.CapAdd {
		if capRE.MatchString(capName) {
			s.add("cap_add adds %s", strings.ToUpper(capName))
		} else {
			s.add("cap_add adds a capability")
		}
	}
	for _, ns := range []struct{ key, value string }{
		{"network_mode", cs.NetworkMode},
		{"pid", cs.Pid},
		{"ipc", cs.Ipc},
		{"uts", cs.Uts},
		{"userns_mode", cs.UserNSMode},
		{"cgroup", cs.Cgroup},
	} {
		switch {
		case s.fromSecret(ns.key, ns.value):
		case ns.value == "host":
			s.add("%s host shares a host namespace", ns.key)
		case strings.HasPrefix(ns.value, "container:") && ns.key != "userns_mode":
			s.add("%s joins a container outside the project", ns.key)
		}
	}
	for _, name := range slices.Sorted(mapKeys(cs.Networks)) {
		if n, ok := s.p.Networks[name]; ok && (n.Driver == "host" || (bool(n.External) && n.Name == "host")) {
			s.add("networks: %s is the host network", name)
		}
	}
	for _, d := range cs.Devices {
		s.add("devices maps a host device to %s", strconv.Quote(d.Target))
	}
	if len(cs.DeviceCgroupRules) > 0 {
		s.add("device_cgroup_rules grants access to host devices")
	}
	if len(cs.Gpus) > 0 {
		s.add("gpus requests host GPUs")
	}
	for _, opt := range cs.SecurityOpt {
		if s.fromSecret("security_opt", opt) {
			continue
		}
		if o, bad := unconfined(opt); bad {
			s.add("security_opt %s", o)
		}
	}
	if cs.UseAPISocket {
		s.add("use_api_socket mounts the docker API socket")
	}
	for _, v := range cs.Volumes {
		s.volume(v)
	}
	for _, from := range cs.VolumesFrom {
		if s.fromSecret("volumes_from", from) {
			continue
		}
		if strings.HasPrefix(from, "container:") {
			s.add("volumes_from takes the volumes of a container outside the project")
		}
	}
	for _, ref := range cs.Secrets {
		if obj, ok := s.p.Secrets[ref.Source]; ok {
			s.fileObject("secrets", ref.Source, types.FileObjectConfig(obj))
		}
	}
	for _, ref := range cs.Configs {
		if obj, ok := s.p.Configs[ref.Source]; ok {
			s.fileObject("configs", ref.Source, types.FileObjectConfig(obj))
		}
	}
}

func (s *scanner) fileObject(key, name string, obj types.FileObjectConfig) {
	if obj.File == "" || s.fromSecret(key+": "+name+".file", obj.File) {
		return
	}
	rel, ok := s.c.inRelease(obj.File)
	switch {
	case !ok:
		s.add("%s: %s reads a file from outside the release", key, name)
	case rel == renderedEnv:
		s.add("%s: %s is the release's .env, which holds every secret of the environment", key, name)
	}
}

// build scans a build section: docker compose up builds a missing image on the box,
// with BuildKit, as root, so a build reaches the host as much as a container does.
func (s *scanner) build(b *types.BuildConfig) {
	if b == nil {
		return
	}
	var sshPaths []string
	for _, k := range b.SSH {
		sshPaths = append(sshPaths, k.Path)
	}
	if s.fromSecret("build", append(append(append([]string{b.Context, b.Dockerfile, b.Network},
		slices.Collect(maps.Values(b.AdditionalContexts))...), sshPaths...), append(b.CacheFrom, b.CacheTo...)...)...) {
		return
	}
	local := b.Context != "" && !strings.Contains(b.Context, "://") && !strings.HasPrefix(b.Context, "git@")
	if local {
		rel, ok := s.c.inRelease(b.Context)
		if !ok {
			// Also a parent of the release: it would hold the release and its .env.
			s.add("build.context is outside the release")
		} else {
			if b.Dockerfile != "" {
				df := b.Dockerfile
				if !path.IsAbs(df) {
					df = path.Join(b.Context, df)
				}
				if _, ok := s.c.inRelease(df); !ok {
					s.add("build.dockerfile is outside the release")
				}
			}
			if rel == "." {
				s.envInContext("build.context .", contextIgnoreFiles(s.c.dir, dockerfileRef{
					context: b.Context, dockerfile: b.Dockerfile, inline: b.DockerfileInline}))
			}
		}
	}
	if b.Privileged {
		s.add("build.privileged is true")
	}
	if len(b.Entitlements) > 0 {
		s.add("build.entitlements grants build privileges")
	}
	if b.Network == "host" {
		s.add("build.network host shares the host network")
	}
	for _, name := range slices.Sorted(mapKeys(b.AdditionalContexts)) {
		v := b.AdditionalContexts[name]
		if strings.Contains(v, "://") || strings.HasPrefix(v, "git@") || strings.HasPrefix(v, "service:") {
			continue
		}
		rel, ok := s.c.inRelease(v)
		switch {
		case !ok:
			s.add("build.additional_contexts: %s is outside the release", strconv.Quote(name))
		case rel == ".":
			// A named context reads only its own .dockerignore (BuildKit's dockerui).
			s.envInContext("build.additional_contexts: "+strconv.Quote(name)+" (the release directory)", []string{dockerignoreName})
		}
	}
	for i, k := range b.SSH {
		if k.Path == "" {
			s.add("build.ssh[%d] forwards the agent's ssh-agent", i)
		} else if _, ok := s.c.inRelease(k.Path); !ok {
			s.add("build.ssh[%d] reads a key from outside the release", i)
		}
	}
	for _, ref := range b.Secrets {
		if obj, ok := s.p.Secrets[ref.Source]; ok {
			s.fileObject("build.secrets", ref.Source, types.FileObjectConfig(obj))
		}
	}
	for _, c := range []struct {
		key  string
		list []string
	}{{"cache_from", b.CacheFrom}, {"cache_to", b.CacheTo}} {
		for i, e := range c.list {
			if localCache(e) {
				s.add("build.%s[%d] is a local cache on the host", c.key, i)
			}
		}
	}
}

// localCache reports whether a cache_from/cache_to entry is BuildKit's local cache,
// which reads (src=) or writes (dest=) a host directory.
func localCache(e string) bool {
	for f := range strings.SplitSeq(e, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		if strings.EqualFold(k, "type") && strings.EqualFold(strings.TrimSpace(v), "local") {
			return true
		}
	}
	return false
}

func (s *scanner) volume(v types.ServiceVolumeConfig) {
	written, found := s.c.rawVolumeFor(s.where, v.Target)
	target := showPath(v.Target)
	if found {
		target = showPath(written.target)
	}
	if s.fromSecret("volumes: the source of the mount at "+target, v.Source) {
		return
	}
	switch v.Type {
	case types.VolumeTypeBind:
		switch {
		case isDockerSocket(v.Source):
			s.add("volumes: bind mount of the docker socket at %s", target)
		case strings.HasSuffix(v.Source, ".sock"):
			s.add("volumes: bind mount of a host unix socket at %s", target)
		default:
			rel, ok := s.c.inRelease(v.Source)
			vars := sourceVariables(written.source)
			switch {
			case !ok && found && strings.HasPrefix(written.source, "~"):
				s.add("volumes: bind mount of a home directory (~) at %s, outside the release", target)
			case !ok && len(vars) > 0:
				s.add("volumes: bind mount from outside the release at %s: its source comes from %s", target, strings.Join(vars, ", "))
			case !ok:
				s.add("volumes: bind mount from outside the release at %s", target)
			case rel == "." || rel == renderedEnv:
				// The release root holds the rendered .env: every secret of the
				// environment, not only those this service names.
				s.add("volumes: bind mount of the release directory or its .env at %s exposes every secret of the environment; mount a subdirectory", target)
			}
		}
	case types.VolumeTypeNamedPipe:
		s.add("volumes: npipe mount at %s", target)
	case types.VolumeTypeVolume:
		vol, ok := s.p.Volumes[v.Source]
		if !ok || (vol.Driver != "" && vol.Driver != "local") {
			return
		}
		if s.fromSecret("volumes: volume "+v.Source+" driver_opts", slices.Collect(maps.Values(vol.DriverOpts))...) {
			return
		}
		device, dev := vol.DriverOpts["device"]
		switch {
		case dev && strings.Contains(vol.DriverOpts["o"], "bind"):
			s.add("volumes: volume %s is a bind mount of a host path (driver_opts.device) at %s", v.Source, target)
		case dev && strings.HasPrefix(device, "/") && !strings.HasPrefix(device, "//"):
			s.add("volumes: volume %s mounts a host device or path (driver_opts.device) at %s", v.Source, target)
		}
	}
}

func isDockerSocket(p string) bool {
	base := path.Base(path.Clean(p))
	return base == "docker.sock" || base == "docker_engine" || strings.HasSuffix(base, "docker.sock")
}

// unconfined reports whether a security_opt entry turns a confinement off, and the
// option in canonical key=value form.
func unconfined(opt string) (string, bool) {
	key, value, found := strings.Cut(opt, "=")
	if !found {
		key, value, _ = strings.Cut(opt, ":")
	}
	key = strings.ToLower(strings.TrimSpace(key))
	value = strings.ToLower(strings.TrimSpace(value))
	switch {
	case key == "label" && value == "disable":
		return "label=disable", true
	case value == "unconfined":
		if !capRE.MatchString(key) {
			key = "an option"
		}
		return key + "=unconfined", true
	case key == "seccomp" && value != "builtin":
		// compose reads any other value as a profile file: one the agent cannot
		// judge, and {"defaultAction":"SCMP_ACT_ALLOW"} is unconfined by another name.
		return "seccomp loads a custom profile", true
	case key == "label" && (value == "type:spc_t" || strings.HasPrefix(value, "type:") && strings.HasSuffix(value, "unconfined_t")):
		// spc_t (the "super privileged container" type) and unconfined_t lift the
		// SELinux confinement as label=disable does. Other types are policies the
		// host loaded, like AppArmor profiles.
		return "label " + strings.TrimPrefix(value, "type:") + " is unconfined", true
	}
	return "", false
}
