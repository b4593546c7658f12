package composecheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/monky/monky-deployd/deployd/codes"
)

// ReleaseDir is the prefix of the fake absolute directory the compose files are loaded
// in: each Check loads them under ReleaseDir plus a random suffix, so that a compose
// file cannot write that directory as an absolute path (it would name a host
// directory on the box). Relative paths in the compose files resolve under it; a bind
// source that does not resolve under it is outside the release. Nothing is ever read
// from it, and no finding shows it.
const ReleaseDir = "/monky/release"

// secretPlaceholder is the value a secret name takes during the load: secrets are
// unknown at verify time, set and non-empty.
const secretPlaceholder = "monky-secret-placeholder"

// maxPathsPerVariable caps the key paths listed in one UNRESOLVED_VARS detail.
const maxPathsPerVariable = 5

// Input is what Check looks at: the compose files of a bundle and what the manifest
// says about them.
type Input struct {
	// Files maps a bundle path to its content: the compose files, any env_file they
	// name and the .dockerignore and <dockerfile>.dockerignore files (IsDockerignore),
	// as found in the bundle. A file in BundleFiles but not in Files could not be read:
	// an ignore file missing here never counts as excluding anything.
	Files map[string][]byte
	// ComposeFiles is manifest.compose_files, in order; later files override earlier
	// ones, as with `docker compose -f a -f b`.
	ComposeFiles []string
	// BundleFiles is manifest.files: every bundle path.
	BundleFiles []string
	// Vars holds the manifest.vars values.
	Vars map[string]string
	// SecretNames are the names of manifest.secrets. Their values are unknown at verify
	// time; they count as set and non-empty.
	SecretNames []string
	// AllowPrivileged names the services the box allows to be privileged.
	AllowPrivileged []string
	// ProjectName is the compose project name for the load (e.g. "monky"); empty means
	// "monky".
	ProjectName string
}

// Finding is one reason to refuse the bundle.
type Finding struct {
	// Code is one of codes.ComposeInvalid, codes.UnresolvedVars, codes.Privileged and
	// codes.ManifestPaths.
	Code codes.Code
	// Detail names files, variables, services, keys and container paths; never the
	// value of a variable.
	Detail string
}

// Result is the outcome of Check.
type Result struct {
	// Services holds the sorted names of the services of the loaded model (the ones
	// `docker compose up` starts: services behind a profile and jobs are left out). When
	// the model cannot be loaded, it holds the service names found in the compose files.
	// Never nil.
	Services []string
	// Findings is sorted by Code, then Detail, without duplicates. Empty means accepted.
	Findings []Finding
	// Warnings are compose's own warnings about the files (an obsolete version key, a
	// deprecated external.name), naming the bundle's file; they refuse nothing. Sorted,
	// without duplicates; nil when there is none.
	Warnings []string
	// Images holds the image of each service of Services, sorted by service; nil when
	// the model could not be loaded.
	Images []Image
	// Every lists every service of the loaded model, active or behind a profile,
	// sorted by name; nil when the model could not be loaded.
	Every []ServiceInfo `json:"-"`
}

// OK reports whether the check found nothing to refuse.
func (r Result) OK() bool { return len(r.Findings) == 0 }

// usage is where an unresolved variable is used in one compose file, and why it is
// unresolved.
type usage struct {
	why   string
	paths []string
}

type checker struct {
	in       Input
	findings []Finding
	warnings []string
	// unresolved maps compose file -> variable -> how it is used.
	unresolved map[string]map[string]*usage
	rawNames   map[string]bool
	// rawVolumes holds each service's and job's volumes as written ("service x").
	rawVolumes map[string][]rawVolume
	// look is the interpolation mapping of the load.
	look func(string) (string, bool)
	// dir is this Check's load directory: ReleaseDir plus a random suffix.
	dir string
}

// loadDir returns a fresh load directory under ReleaseDir.
func loadDir() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return ReleaseDir + "-" + hex.EncodeToString(b[:])
}

// inRelease returns the path of abs relative to this Check's load directory and
// whether it is inside it.
func (c *checker) inRelease(abs string) (string, bool) { return inDir(c.dir, abs) }

func (c *checker) add(code codes.Code, format string, args ...any) {
	c.findings = append(c.findings, Finding{Code: code, Detail: fmt.Sprintf(format, args...)})
}

// Check loads the compose files of in from memory with compose-go, as `docker compose`
// would on the box, and returns the service list and every finding: compose files that
// compose-spec rejects or that reach outside the bundle (COMPOSE_INVALID), variables
// that nothing provides (UNRESOLVED_VARS), services that get host privileges without
// being allowed to (PRIVILEGED), and env_file references that are not bundle files
// (MANIFEST_PATHS). Check reads no file, no environment variable and no network. A
// context that is already done yields a COMPOSE_INVALID finding: a check that did not
// run never passes.
func Check(ctx context.Context, in Input) Result {
	c := &checker{in: in, unresolved: map[string]map[string]*usage{}, rawNames: map[string]bool{}, rawVolumes: map[string][]rawVolume{}, dir: loadDir()}
	if in.ProjectName == "" {
		c.in.ProjectName = "monky"
	}
	if err := ctx.Err(); err != nil {
		// A check that did not run must not pass.
		c.add(codes.ComposeInvalid, "compose check did not run: %v", err)
		return Result{Services: []string{}, Findings: c.findings}
	}
	if loader.NormalizeProjectName(c.in.ProjectName) != c.in.ProjectName {
		c.add(codes.ComposeInvalid, "project name %q is not a valid compose project name (lowercase letters, digits, - and _)", c.in.ProjectName)
		return Result{Services: []string{}, Findings: c.findings}
	}
	lookup := c.lookup()
	c.look = lookup

	loadable := true
	var configFiles []types.ConfigFile
	if len(in.ComposeFiles) == 0 {
		c.add(codes.ComposeInvalid, "manifest names no compose file")
		loadable = false
	}
	for _, name := range in.ComposeFiles {
		content, ok := in.Files[name]
		if !ok {
			c.add(codes.ManifestPaths, "compose file %s is listed in compose_files but not in the bundle", name)
			loadable = false
			continue
		}
		if !c.scanRaw(name, content, lookup) {
			loadable = false
		}
		// The bundle path, not the load path: compose-go names it in its own log lines
		// (an obsolete version key), and the operator knows the bundle's files.
		// Relative paths in the files still resolve under WorkingDir (c.dir).
		configFiles = append(configFiles, types.ConfigFile{Filename: name, Content: content})
	}
	c.reportUnresolved()

	var services []string
	var imgs []Image
	var every []ServiceInfo
	if loadable {
		project, err := c.load(ctx, configFiles, lookup)
		if err != nil && len(c.unresolved) > 0 {
			// The load failed on the empty strings that stand in for unresolved
			// variables (an empty bind source is not a volume spec). Load once more with
			// a placeholder inside the release, so that the privilege scan still runs
			// and the bundle's other refusals are not hidden behind UNRESOLVED_VARS.
			project, err = c.load(ctx, configFiles, c.placeholders(lookup))
		}
		switch {
		case err != nil && len(c.unresolved) > 0:
			// The load failed even with placeholders; UNRESOLVED_VARS already says
			// what to fix first.
		case err != nil:
			c.add(codes.ComposeInvalid, "%s", describeLoadError(ctx, err, in.ComposeFiles))
		default:
			services = slices.Sorted(maps.Keys(project.Services))
			c.scanProject(project)
			imgs = images(project)
			every = inventory(project)
		}
	}
	if services == nil {
		services = slices.Sorted(maps.Keys(c.rawNames))
	}
	if services == nil {
		services = []string{}
	}
	return Result{Services: services, Findings: sortFindings(c.findings), Warnings: sortWarnings(c.warnings), Images: imgs, Every: every}
}

func sortWarnings(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	slices.Sort(in)
	return slices.Compact(in)
}

// environment is the explicit environment of the load: vars, and secret names with a
// placeholder value.
func (c *checker) environment() types.Mapping {
	env := types.Mapping{}
	for k, v := range c.in.Vars {
		env[k] = v
	}
	for _, k := range c.in.SecretNames {
		env[k] = secretPlaceholder
	}
	return env
}

// lookup returns the interpolation mapping: the environment plus COMPOSE_PROJECT_NAME,
// which compose-go sets itself.
func (c *checker) lookup() func(string) (string, bool) {
	env := c.environment()
	env["COMPOSE_PROJECT_NAME"] = c.in.ProjectName
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// unresolvedPlaceholder stands in for an unresolved variable in the second load: a
// relative path inside the release, so that a bind source made of it is judged like
// any other bind inside the release and adds no finding of its own.
const unresolvedPlaceholder = "./.monky-unresolved"

// placeholders extends lookup with unresolvedPlaceholder for every unresolved variable.
func (c *checker) placeholders(lookup func(string) (string, bool)) func(string) (string, bool) {
	missing := map[string]bool{}
	for _, vars := range c.unresolved {
		for name := range vars {
			missing[name] = true
		}
	}
	return func(name string) (string, bool) {
		if v, ok := lookup(name); ok {
			return v, ok
		}
		if missing[name] {
			return unresolvedPlaceholder, true
		}
		return "", false
	}
}

// errLoaderPanic stands for a panic inside compose-go: the file is refused, the agent
// keeps running.
var errLoaderPanic = errors.New("compose-go panicked")

func (c *checker) load(ctx context.Context, files []types.ConfigFile, lookup func(string) (string, bool)) (project *types.Project, err error) {
	defer func() {
		if recover() != nil {
			project, err = nil, errLoaderPanic
		}
	}()
	// The load interpolates with the same strict resolver, discarding what it records:
	// unresolved variables become "" without a warning on the global logrus logger.
	silent := &resolver{lookup: lookup}
	details := types.ConfigDetails{
		WorkingDir:  c.dir,
		ConfigFiles: files,
		Environment: c.environment(),
	}
	return loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(c.in.ProjectName, true)
		o.SetWorkingDirExplicit(true)
		o.Interpolate.LookupValue = lookup
		o.Interpolate.Substitute = silent.substituteFunc
		// include and extends.file are refused before the load; these keep compose-go
		// from reading env_file and label_file from the disk.
		o.SkipInclude = true
		o.SkipResolveEnvironment = true
		o.SkipResolveLabels = true
	})
}

// use records an unresolved variable used in file at key path at. When a variable is
// unresolved for several reasons, the smallest reason text is kept (deterministic).
func (c *checker) use(file, name, why, at string) {
	vars := c.unresolved[file]
	if vars == nil {
		vars = map[string]*usage{}
		c.unresolved[file] = vars
	}
	u := vars[name]
	if u == nil {
		u = &usage{why: why}
		vars[name] = u
	}
	if why < u.why {
		u.why = why
	}
	u.paths = append(u.paths, at)
}

func (c *checker) reportUnresolved() {
	for file, vars := range c.unresolved {
		for name, u := range vars {
			paths := u.paths
			slices.Sort(paths)
			paths = slices.Compact(paths)
			more := ""
			if len(paths) > maxPathsPerVariable {
				more = fmt.Sprintf(" and %d more", len(paths)-maxPathsPerVariable)
				paths = paths[:maxPathsPerVariable]
			}
			why := strings.ReplaceAll(u.why, "NAME", name)
			c.add(codes.UnresolvedVars, "%s: variable %s %s (at %s%s)", file, name, why, strings.Join(paths, ", "), more)
		}
	}
}

func sortFindings(in []Finding) []Finding {
	if len(in) == 0 {
		return nil
	}
	slices.SortFunc(in, func(a, b Finding) int {
		if a.Code != b.Code {
			return strings.Compare(string(a.Code), string(b.Code))
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	return slices.Compact(in)
}
