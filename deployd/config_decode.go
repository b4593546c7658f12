package deployd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/monky/monky-deployd/internal/fsutil"
)

// This file reads a config: the strict YAML walker that fills a DefaultConfig from the
// node tree, naming the file, the line and the key of every problem. The checks of the
// values are in validate.go.

// maxConfigSize bounds the config file; a larger file is refused.
const maxConfigSize = 1 << 20

// LoadConfig reads and validates the config file at path. Errors name path. A path
// that is not a regular file (a fifo, a directory, a device) is refused at once,
// without waiting on it.
func LoadConfig(path string) (Config, error) {
	data, err := fsutil.ReadRegular(path, maxConfigSize)
	if err != nil {
		return Config{}, &ConfigError{File: path, Msg: fsutil.Problem(err), Err: err}
	}
	return ParseConfig(path, data)
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
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
		p.structs(n, f, key)
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

// structs decodes the list n of mappings into the slice of structs f (windows); an
// item's keys are named "<key>[<n>].<field>", n from 1.
func (p *cfgParser) structs(n *yaml.Node, f reflect.Value, key string) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n.Line, key, "key %q: want a list of mappings, got %s", key, nodeKind(n))
		return
	}
	list := reflect.MakeSlice(f.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		item = resolveAlias(item)
		ik := fmt.Sprintf("%s[%d]", key, i+1)
		if item.Kind != yaml.MappingNode {
			p.fail(item.Line, ik, "key %q: want a mapping, got %s", ik, nodeKind(item))
			continue
		}
		v := reflect.New(f.Type().Elem()).Elem()
		p.lines[ik] = item.Line
		p.mapping(item, v, ik+".")
		list = reflect.Append(list, v)
	}
	if list.Len() > 0 {
		f.Set(list)
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
