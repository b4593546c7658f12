// Package plan computes what `docker compose up -d --remove-orphans` would change
// when the agent moves a box from its live release to another one, without running
// compose (docs/PLAN.md): which services it would add, remove, recreate or keep, and
// why, naming services, files, variables and settings, never a value.
//
// A service is recreated when compose would recreate its container: compose
// compares a hash of the service's configuration (docker/compose v2
// pkg/compose/hash.go ServiceHash: the JSON of compose-go's types.ServiceConfig
// without build, pull_policy, scale, deploy.replicas, depends_on and profiles) with
// the hash on the running container (pkg/compose/convergence.go mustRecreate).
// Diff applies the same rule to the two loaded projects (composecheck.LoadProject),
// each loaded in the directory the agent runs it in: releases/<sha>. A relative bind
// mount therefore has a new source path in every release, and compose recreates its
// service on every new release even when the files it mounts are the same; the plan
// says so (ReasonReleaseDir) and, apart, whether those files changed (ReasonFile).
package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// Change is what compose would do with one service.
type Change string

// The changes of a service.
const (
	// Added: a service of the new release only; compose creates it.
	Added Change = "added"
	// Removed: a service of the live release only; --remove-orphans removes it.
	Removed Change = "removed"
	// Recreated: its configuration hash changes; compose replaces its containers.
	Recreated Change = "recreated"
	// Scaled: only its replicas change; compose adds or removes containers and keeps
	// the others.
	Scaled Change = "scaled"
	// Kept: compose leaves its containers as they are.
	Kept Change = "kept"
)

// Kind is the kind of a reason.
type Kind string

// The kinds of reasons.
const (
	// ReasonImage: the image reference changed.
	ReasonImage Kind = "image"
	// ReasonEnvironment: variables of its environment were added, removed or changed
	// (Names are the variables).
	ReasonEnvironment Kind = "environment"
	// ReasonReleaseDir: settings that name files of the release (bind mounts) differ
	// only by the release directory, which is new in every release (Names are the
	// bind sources, relative to the release).
	ReasonReleaseDir Kind = "release_dir"
	// ReasonFile: files of the release the service mounts changed (Names are the
	// files).
	ReasonFile Kind = "file"
	// ReasonSettings: other settings changed (Names are the compose keys).
	ReasonSettings Kind = "settings"
	// ReasonReplicas: the number of replicas changed.
	ReasonReplicas Kind = "replicas"
	// ReasonSources: the service mounts configs or secrets of the release, which are
	// new in every release (SourcesLabel; Names are their files that changed).
	ReasonSources Kind = "sources"
)

// Reason says why a service changes. Text names files, variables and keys, never a
// value.
type Reason struct {
	Kind  Kind
	Names []string
	Text  string
}

// Service is one service of either release and what compose would do with it:
// Diff's result, which deployd turns into its public PlanService (deployd.Plan is
// the plan's only printed shape).
type Service struct {
	Name    string
	Change  Change
	Reasons []Reason
}

// Side is one release as compose would run it: its project loaded in the directory
// the agent runs it in, and a digest of each of its files.
type Side struct {
	// SHA and Serial identify the release.
	SHA    string
	Serial int64
	// Dir is the project directory compose runs the release in (releases/<sha>).
	Dir string
	// Project is the release's compose project (composecheck.LoadProject).
	Project *types.Project
	// Files maps each bundle path of the release to a digest of its content.
	Files map[string]string
	// Sources is the SourcesLabel each service's containers carry (or will carry)
	// in this release; a service without one is absent.
	Sources map[string]string
}

// Diff is what compose would do moving from live to next: every service of either,
// sorted by name, and notes about the project (networks, volumes). A nil live is a
// box that serves nothing (every service is added); a nil next is a down (every live
// service is removed).
func Diff(live, next *Side) ([]Service, []string) {
	names := map[string]bool{}
	for _, s := range []*Side{live, next} {
		if s != nil && s.Project != nil {
			for n := range s.Project.Services {
				names[n] = true
			}
		}
	}
	out := []Service{}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		_, inLive := services(live)[n]
		_, inNext := services(next)[n]
		switch {
		case !inLive:
			out = append(out, Service{Name: n, Change: Added})
		case !inNext:
			out = append(out, Service{Name: n, Change: Removed})
		default:
			out = append(out, compare(live, next, n))
		}
	}
	var notes []string
	if live != nil && next != nil && live.Project != nil && next.Project != nil {
		notes = projectNotes(live, next)
	}
	return out, notes
}

func services(s *Side) types.Services {
	if s == nil || s.Project == nil {
		return nil
	}
	return s.Project.Services
}

// hashable is what compose hashes of a service (docker/compose v2.40 ServiceHash).
func hashable(s types.ServiceConfig) types.ServiceConfig {
	s.Build = nil
	s.PullPolicy = ""
	s.Scale = nil
	if s.Deploy != nil {
		d := *s.Deploy
		d.Replicas = nil
		s.Deploy = &d
	}
	s.DependsOn = nil
	s.Profiles = nil
	return s
}

// releaseToken stands for the release directory when two configurations are
// compared apart from it.
const releaseToken = "${MONKY_RELEASE_DIR}"

// fields is the JSON of a service's hashed configuration, key by key, as it is and
// with the release directory replaced by releaseToken.
func fields(s types.ServiceConfig, dir string) (raw, norm map[string]json.RawMessage) {
	data, err := json.Marshal(hashable(s))
	if err != nil {
		return map[string]json.RawMessage{}, map[string]json.RawMessage{}
	}
	_ = json.Unmarshal(data, &raw)
	_ = json.Unmarshal(replaceDir(data, dir), &norm)
	return raw, norm
}

// replaceDir replaces the release directory dir in JSON text (dir is a clean
// absolute path; encoding/json writes it unescaped unless it holds characters it
// escapes, which releases/<sha> never does).
func replaceDir(data []byte, dir string) []byte {
	if dir == "" {
		return data
	}
	return bytes.ReplaceAll(data, []byte(dir), []byte(releaseToken))
}

// compare decides recreated, scaled or kept for a service of both releases.
func compare(live, next *Side, name string) Service {
	a, b := live.Project.Services[name], next.Project.Services[name]
	rawA, normA := fields(a, live.Dir)
	rawB, normB := fields(b, next.Dir)
	svc := Service{Name: name, Change: Kept}
	var settings, dirKeys []string
	for _, k := range slices.Sorted(maps.Keys(union(rawA, rawB))) {
		if bytes.Equal(rawA[k], rawB[k]) {
			continue
		}
		switch {
		case k == "image":
			svc.Reasons = append(svc.Reasons, Reason{Kind: ReasonImage, Text: "image changed"})
		case k == "environment":
			if r, ok := environmentReason(a.Environment, b.Environment); ok {
				svc.Reasons = append(svc.Reasons, r)
			}
		case bytes.Equal(normA[k], normB[k]):
			dirKeys = append(dirKeys, k)
		default:
			settings = append(settings, k)
		}
	}
	if len(dirKeys) > 0 {
		svc.Reasons = append(svc.Reasons, releaseDirReason(b, next.Dir, dirKeys))
	}
	if r, ok := filesReason(live, next, b); ok && (len(dirKeys) > 0 || slices.Contains(settings, "volumes")) {
		svc.Reasons = append(svc.Reasons, r)
	}
	if len(settings) > 0 {
		svc.Reasons = append(svc.Reasons, Reason{Kind: ReasonSettings, Names: settings,
			Text: "settings changed: " + strings.Join(settings, ", ")})
	}
	if live.Sources[name] != next.Sources[name] {
		svc.Reasons = append(svc.Reasons, sourcesReason(live, next, name, b))
	}
	if len(svc.Reasons) > 0 {
		svc.Change = Recreated
		return svc
	}
	if a.GetScale() != b.GetScale() {
		svc.Change = Scaled
		svc.Reasons = []Reason{{Kind: ReasonReplicas, Text: fmt.Sprintf("replicas %d -> %d", a.GetScale(), b.GetScale())}}
	}
	return svc
}

func union(a, b map[string]json.RawMessage) map[string]bool {
	u := make(map[string]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// environmentReason names the variables added, removed or changed; never a value.
func environmentReason(a, b types.MappingWithEquals) (Reason, bool) {
	var names, parts []string
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		va, inA := a[k]
		vb, inB := b[k]
		switch {
		case !inA:
			parts = append(parts, k+" added")
		case !inB:
			parts = append(parts, k+" removed")
		case (va == nil) != (vb == nil) || (va != nil && *va != *vb):
			parts = append(parts, k+" changed")
		default:
			continue
		}
		names = append(names, k)
	}
	if len(names) == 0 {
		return Reason{}, false
	}
	return Reason{Kind: ReasonEnvironment, Names: names, Text: "environment: " + strings.Join(parts, ", ")}, true
}

// bindSources are the sources of a service's bind mounts inside the release,
// relative to it, sorted.
func bindSources(s types.ServiceConfig, dir string) []string {
	var out []string
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		if rel, ok := inDir(dir, v.Source); ok {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// inDir is abs relative to dir, and whether it is inside it.
func inDir(dir, abs string) (string, bool) {
	if dir == "" || !path.IsAbs(abs) {
		return "", false
	}
	clean := path.Clean(abs)
	if clean == dir {
		return ".", true
	}
	rel, ok := strings.CutPrefix(clean, dir+"/")
	return rel, ok
}

func releaseDirReason(s types.ServiceConfig, dir string, keys []string) Reason {
	srcs := bindSources(s, dir)
	if len(srcs) == 0 {
		return Reason{Kind: ReasonReleaseDir, Names: keys,
			Text: "settings that name the release directory (" + strings.Join(keys, ", ") + ") change with every new release"}
	}
	shown := make([]string, len(srcs))
	for i, p := range srcs {
		shown[i] = "./" + p
	}
	return Reason{Kind: ReasonReleaseDir, Names: srcs,
		Text: "bind mounts of the release (" + strings.Join(shown, ", ") + ") move to the new release directory: compose recreates it on every new release, whether or not the files changed"}
}

// filesReason names the files under the service's bind sources whose content
// differs between the releases (added and removed files included).
func filesReason(live, next *Side, s types.ServiceConfig) (Reason, bool) {
	changed := changedUnder(live, next, bindSources(s, next.Dir))
	if len(changed) == 0 {
		return Reason{Kind: ReasonFile, Text: "the files it mounts are unchanged"}, true
	}
	return Reason{Kind: ReasonFile, Names: changed, Text: "files it mounts changed: " + strings.Join(changed, ", ")}, true
}

// changedUnder lists the files at or under any of prefixes whose digest differs.
func changedUnder(live, next *Side, prefixes []string) []string {
	var out []string
	paths := map[string]bool{}
	for p := range live.Files {
		paths[p] = true
	}
	for p := range next.Files {
		paths[p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if live.Files[p] == next.Files[p] {
			continue
		}
		for _, pre := range prefixes {
			if pre == "." || p == pre || strings.HasPrefix(p, pre+"/") {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// sourcesReason says why a service's SourcesLabel changes: the config and secret
// files of the release it mounts that changed, else the other kinds of source.
func sourcesReason(live, next *Side, name string, s types.ServiceConfig) Reason {
	var files []string
	for _, c := range s.Configs {
		if obj, ok := next.Project.Configs[c.Source]; ok {
			files = append(files, fileOf(types.FileObjectConfig(obj), next.Dir)...)
		}
	}
	for _, c := range s.Secrets {
		if obj, ok := next.Project.Secrets[c.Source]; ok {
			files = append(files, fileOf(types.FileObjectConfig(obj), next.Dir)...)
		}
	}
	changed := changedUnder(live, next, files)
	what := "the files they come from are unchanged"
	if len(changed) > 0 {
		what = "files changed: " + strings.Join(changed, ", ")
	}
	if live.Sources[name] == "" {
		return Reason{Kind: ReasonSources, Names: changed,
			Text: "its containers carry no " + SourcesLabel + " label yet: compose recreates it to add it (" + what + ")"}
	}
	return Reason{Kind: ReasonSources, Names: changed,
		Text: "configs or secrets it mounts come from the release directory or its variables, new in every release: compose recreates it on every new release (" + what + ")"}
}

func fileOf(o types.FileObjectConfig, dir string) []string {
	if rel, ok := inDir(dir, o.File); ok && o.File != "" {
		return []string{rel}
	}
	return nil
}

// projectNotes are the changes of networks and volumes both releases define.
func projectNotes(live, next *Side) []string {
	var notes []string
	for _, n := range slices.Sorted(maps.Keys(next.Project.Networks)) {
		old, ok := live.Project.Networks[n]
		if !ok || sameJSON(old, next.Project.Networks[n], live.Dir, next.Dir) {
			continue
		}
		var on []string
		for _, s := range slices.Sorted(maps.Keys(next.Project.Services)) {
			if _, ok := next.Project.Services[s].Networks[n]; ok {
				on = append(on, s)
			}
		}
		notes = append(notes, fmt.Sprintf("network %s: its configuration changed; compose removes and re-creates it, stopping the containers on it (%s)", n, strings.Join(on, ", ")))
	}
	for _, v := range slices.Sorted(maps.Keys(next.Project.Volumes)) {
		old, ok := live.Project.Volumes[v]
		if !ok || sameJSON(old, next.Project.Volumes[v], live.Dir, next.Dir) {
			continue
		}
		notes = append(notes, fmt.Sprintf("volume %s: its configuration changed; compose does not re-create an existing volume without a confirmation (its data would be lost): decide by hand before the apply", v))
	}
	return notes
}

func sameJSON(a, b any, dirA, dirB string) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(replaceDir(ja, dirA), replaceDir(jb, dirB))
}
