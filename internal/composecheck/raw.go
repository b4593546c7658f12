package composecheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
	"go.yaml.in/yaml/v3"

	"github.com/monky/monky-deployd/deployd/codes"
)

// scanRaw parses one compose file as YAML and walks every scalar value (keys are not
// interpolated by compose) with the strict resolver, recording unresolved variables
// with the key path where they are used. It also refuses the keys that make compose-go
// read the disk (include, extends.file) and collects the service names. It returns
// false when the file must not be handed to the loader.
func (c *checker) scanRaw(file string, content []byte, lookup func(string) (string, bool)) bool {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.add(codes.ComposeInvalid, "%s: not valid YAML%s", file, yamlLine(err))
			return false
		}
		docs = append(docs, &doc)
	}

	w := &walker{
		file:     file,
		visited:  map[*yaml.Node]bool{},
		resolver: &resolver{lookup: lookup},
		checker:  c,
		loadable: true,
	}
	for _, doc := range docs {
		root := doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		w.structure(root)
		w.walk(root, "")
	}
	return w.loadable
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func yamlLine(err error) string {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		return " (line " + m[1] + ")"
	}
	return ""
}

type walker struct {
	file     string
	visited  map[*yaml.Node]bool
	resolver *resolver
	checker  *checker
	loadable bool
}

// mapValue returns the value of key in a mapping node, following aliases.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return deref(n.Content[i+1])
		}
	}
	return nil
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// structure checks the top-level shape: include and extends.file read other files
// from the disk, which a bundle's compose files may not do.
func (w *walker) structure(root *yaml.Node) {
	// compose-go's own warnings, named with the bundle's file (its log line would
	// name the load path, once per process).
	if mapValue(root, "version") != nil {
		w.checker.warnings = append(w.checker.warnings, w.file+": the attribute `version` is obsolete, it will be ignored, please remove it to avoid potential confusion")
	}
	for _, section := range []string{"networks", "volumes", "secrets", "configs"} {
		objects := mapValue(root, section)
		if objects == nil || objects.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(objects.Content); i += 2 {
			if mapValue(mapValue(objects.Content[i+1], "external"), "name") != nil {
				w.checker.warnings = append(w.checker.warnings, fmt.Sprintf("%s: %s.%s: external.name is deprecated. Please set name and external: true",
					w.file, section, objects.Content[i].Value))
			}
		}
	}
	if mapValue(root, "include") != nil {
		w.checker.add(codes.ComposeInvalid, "%s: include is not supported in a bundle: list every compose file in compose_files", w.file)
		w.loadable = false
	}
	for _, section := range []string{"secrets", "configs"} {
		objects := mapValue(root, section)
		if objects == nil || objects.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(objects.Content); i += 2 {
			env := mapValue(objects.Content[i+1], "environment")
			if env != nil && env.Kind == yaml.ScalarNode && !strings.Contains(env.Value, "$") {
				w.passThrough(env.Value, section+"."+objects.Content[i].Value+".environment")
			}
		}
	}
	for _, section := range []string{"services", "jobs"} {
		services := mapValue(root, section)
		if services == nil || services.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(services.Content); i += 2 {
			name := services.Content[i].Value
			if section == "services" {
				w.checker.rawNames[name] = true
			}
			at := section + "." + name
			w.checker.collectVolumes(strings.TrimSuffix(section, "s")+" "+name, mapValue(services.Content[i+1], "volumes"))
			w.passThroughList(mapValue(services.Content[i+1], "environment"), at+".environment")
			w.passThroughList(mapValue(mapValue(services.Content[i+1], "build"), "args"), at+".build.args")
			if mapValue(mapValue(services.Content[i+1], "extends"), "file") != nil {
				w.checker.add(codes.ComposeInvalid, "%s: %s.%s.extends.file is not supported in a bundle: extend a service of the same file or list the file in compose_files", w.file, section, name)
				w.loadable = false
			}
		}
	}
}

// passThroughList checks the entries of an environment or build.args list or mapping
// that take their value from the environment: "NAME" in a list, "NAME:" (null) in a
// mapping. The agent runs compose with an explicit environment, so such a variable is
// empty unless vars or secrets provide it.
func (w *walker) passThroughList(n *yaml.Node, at string) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.SequenceNode:
		for i, item := range n.Content {
			item = deref(item)
			if item != nil && item.Kind == yaml.ScalarNode && !strings.ContainsAny(item.Value, "=$") {
				w.passThrough(strings.TrimSpace(item.Value), at+"["+strconv.Itoa(i)+"]")
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := deref(n.Content[i+1])
			if v != nil && v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				w.passThrough(n.Content[i].Value, at+"."+n.Content[i].Value)
			}
		}
	}
}

func (w *walker) passThrough(name, at string) {
	if name == "" {
		return
	}
	if _, ok := w.resolver.lookup(name); ok {
		return
	}
	w.checker.use(w.file, name, whyPassThrough, at)
}

// walk visits every scalar value below n. An anchored node is walked once, at its
// first use, so that aliases cannot blow the walk up.
func (w *walker) walk(n *yaml.Node, at string) {
	if n == nil || w.visited[n] {
		return
	}
	w.visited[n] = true
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, child := range n.Content {
			p := at
			if n.Kind == yaml.SequenceNode {
				p = at + "[" + strconv.Itoa(i) + "]"
			}
			w.walk(child, p)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := key
			if at != "" {
				p = at + "." + key
			}
			if key == "<<" {
				p = at
			}
			w.walk(n.Content[i+1], p)
		}
	case yaml.AliasNode:
		w.walk(n.Alias, at)
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		found := map[string]string{}
		w.resolver.unresolved = found
		if _, err := w.resolver.substitute(n.Value); err != nil {
			w.checker.add(codes.ComposeInvalid, "%s: invalid interpolation syntax at %s (write a literal $ as $$)", w.file, orTop(at))
			w.loadable = false
			return
		}
		for name, why := range found {
			w.checker.use(w.file, name, why, orTop(at))
		}
	}
}

func orTop(at string) string {
	if at == "" {
		return "the top level"
	}
	return at
}

var safeWordsRE = regexp.MustCompile(`^[A-Za-z][A-Za-z ]*$`)

// describeLoadError turns a compose-go load error into a detail that names files and
// key paths. compose-go's messages may quote values (an invalid port, a cast failure),
// so the raw text is never used: only the file, the key path and a fixed description.
func describeLoadError(ctx context.Context, err error, files []string) string {
	if ctx.Err() != nil {
		return "compose check did not finish: " + ctx.Err().Error()
	}
	msg := err.Error()
	all := strings.Join(files, ", ")
	if errors.Is(err, errLoaderPanic) {
		return all + ": compose-go failed on the files (it panicked)"
	}
	for _, f := range files {
		// The files are loaded under their bundle path (Check).
		if rest, ok := strings.CutPrefix(msg, "failed to parse "+f+": "); ok {
			return fmt.Sprintf("%s: not valid YAML%s", f, yamlLine(errors.New(rest)))
		}
		if rest, ok := strings.CutPrefix(msg, "validating "+f+": "); ok {
			key, _, _ := strings.Cut(rest, " ")
			return fmt.Sprintf("%s: %s does not match the compose specification", f, key)
		}
	}
	for _, prefix := range []string{"error while interpolating ", "invalid interpolation format for "} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			key, _, _ := strings.Cut(rest, ":")
			key = strings.TrimSuffix(strings.Fields(key + " ")[0], ".")
			return fmt.Sprintf("%s: %s has an invalid value after interpolation", all, key)
		}
	}
	var tmplErr *template.InvalidTemplateError
	if errors.As(err, &tmplErr) {
		return fmt.Sprintf("%s: invalid interpolation syntax", all)
	}
	head, _, found := strings.Cut(msg, ":")
	if found && safeWordsRE.MatchString(head) && strings.Contains(head, " ") {
		return fmt.Sprintf("%s: rejected by compose: %s", all, head)
	}
	return fmt.Sprintf("%s: rejected by compose (the message is withheld because it may quote a value)", all)
}
