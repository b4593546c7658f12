package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// SourcesLabel is the container label the agent gives every service that mounts
// compose configs or secrets: a digest of where they come from (Sources). compose
// hashes a service's configuration to decide whether to recreate its container, but
// a config or secret enters that hash by its name only, not by the file or value
// behind it; without the label a service would go on mounting the previous
// release's copy (checked on dockerd 20.10 with compose 2.40). With it, compose
// recreates such a service on every new release, as it does one with a bind mount of
// the release.
const SourcesLabel = "monky.deployd.sources"

// Sources is, for each service of p that mounts configs or secrets, a digest of
// where they come from; services without any are absent. sha is the release's sha.
//
// A config or secret from a file counts by the file's path: compose bind-mounts it,
// and a file of the release is under releases/<sha>, new in every release. So the
// service is recreated on every new release, as one with a bind mount of the release
// is, and never goes on mounting the file of a release that pruning removes. One
// from an environment variable or inline content is interpolated from the release's
// .env, whose values the digest must not carry (a secret): it counts as new in every
// release too. An external one counts by its name: the agent cannot see it change.
func Sources(p *types.Project, sha string) map[string]string {
	out := map[string]string{}
	for name, s := range p.Services {
		var lines []string
		for _, ref := range s.Configs {
			lines = append(lines, sourceLine("config", ref.Source, types.FileObjectConfig(p.Configs[ref.Source]), sha))
		}
		for _, ref := range s.Secrets {
			lines = append(lines, sourceLine("secret", ref.Source, types.FileObjectConfig(p.Secrets[ref.Source]), sha))
		}
		if len(lines) == 0 {
			continue
		}
		slices.Sort(lines)
		sum := sha256.Sum256([]byte(strings.Join(slices.Compact(lines), "\n")))
		out[name] = hex.EncodeToString(sum[:])
	}
	return out
}

// sourceLine describes one config or secret for the digest.
func sourceLine(kind, name string, o types.FileObjectConfig, sha string) string {
	head := kind + " " + strconv.Quote(name)
	switch {
	case bool(o.External):
		return head + " external " + strconv.Quote(o.Name)
	case o.File != "":
		return head + " file " + strconv.Quote(o.File)
	}
	return head + " inline " + sha
}

// LabelsFile is the compose file that gives each service of sources its
// SourcesLabel (bundle.LabelsFileName), or nil when sources is empty. The agent
// passes it to compose after the release's own files.
func LabelsFile(sources map[string]string) []byte {
	if len(sources) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("# Written by monky-deployd: a digest of the configs and secrets each service\n")
	b.WriteString("# mounts, so that compose recreates it on every new release.\n")
	b.WriteString("services:\n")
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		fmt.Fprintf(&b, "  %s:\n    labels:\n      %s: %s\n", strconv.Quote(name), SourcesLabel, strconv.Quote(sources[name]))
	}
	return []byte(b.String())
}
