package composecheck

import (
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// rawVolume is one entry of a service's volumes as written in a compose file, before
// interpolation: what a refusal shows, since the loaded model holds only values.
type rawVolume struct {
	source, target string
}

// collectVolumes records the volumes of one service or job (where: "service x" or
// "job x") as written, in file order; a later compose file's entries come later.
func (c *checker) collectVolumes(where string, volumes *yaml.Node) {
	volumes = deref(volumes)
	if volumes == nil || volumes.Kind != yaml.SequenceNode {
		return
	}
	for _, item := range volumes.Content {
		item = deref(item)
		if item == nil {
			continue
		}
		var rv rawVolume
		switch item.Kind {
		case yaml.ScalarNode:
			parts := splitOutsideBraces(item.Value)
			if len(parts) < 2 {
				continue // an anonymous volume: no source
			}
			rv = rawVolume{source: parts[0], target: parts[1]}
		case yaml.MappingNode:
			src, tgt := mapValue(item, "source"), mapValue(item, "target")
			if src == nil || tgt == nil || src.Kind != yaml.ScalarNode || tgt.Kind != yaml.ScalarNode {
				continue
			}
			rv = rawVolume{source: src.Value, target: tgt.Value}
		default:
			continue
		}
		c.rawVolumes[where] = append(c.rawVolumes[where], rv)
	}
}

// splitOutsideBraces splits a short volume spec at the colons that are not inside a
// ${...} expression (whose default may hold a path with a colon of its own).
func splitOutsideBraces(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			depth++
			i++
		case s[i] == '}' && depth > 0:
			depth--
		case s[i] == ':' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// rawVolumeFor returns the volume of where, as written, whose target interpolates to
// target; the last one wins, as a later compose file overrides an earlier one.
func (c *checker) rawVolumeFor(where, target string) (rawVolume, bool) {
	silent := &resolver{lookup: c.look}
	entries := c.rawVolumes[where]
	for i := len(entries) - 1; i >= 0; i-- {
		t, err := silent.substitute(entries[i].target)
		if err == nil && (t == target || path.Clean(t) == path.Clean(target)) {
			return entries[i], true
		}
	}
	return rawVolume{}, false
}

var varRefRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// sourceVariables returns the variables a source as written is made of, as ${NAME},
// without the escaped $$.
func sourceVariables(source string) []string {
	source = strings.ReplaceAll(source, "$$", "")
	var out []string
	for _, m := range varRefRE.FindAllStringSubmatch(source, -1) {
		out = append(out, "${"+m[1]+"}")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// showPath shows a path as written when it is plain printable text, quoted otherwise
// (a control character must not reach a log line as is).
func showPath(p string) string {
	if p == "" {
		return strconv.Quote(p)
	}
	for _, r := range p {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' {
			return strconv.Quote(p)
		}
	}
	return p
}
