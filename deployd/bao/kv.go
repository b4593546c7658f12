package bao

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/deployd/secret"
)

// Ref is a secret reference relative to the env's root, as a bundle manifest names
// it: {Path: "db", Key: "password"} reads key "password" of
// <kv_mount>/data/envs/<env_id>/db.
type Ref struct {
	// Path is the secret's path below envs/<env_id>/, slash separated.
	Path string
	// Key is the key inside the secret's data.
	Key string
}

// SecretPath builds the KV v2 API path of a secret of env envID:
// "<kvMount>/data/envs/<envID>/<path>". It refuses (ErrSecretPath) an env id that is
// not env-<tier>-<nn>, and a mount or path with a leading or trailing "/", an empty,
// "." or ".." segment, a backslash, a control character, invalid UTF-8 or one of
// "%?#" — anything that could leave the env's root once OpenBao or a proxy cleans or
// unescapes it.
func SecretPath(kvMount, envID, path string) (string, error) {
	if !ids.ValidEnvID(envID) {
		return "", &Error{Op: "secret-path", Kind: ErrSecretPath,
			Detail: fmt.Sprintf("env_id %q does not match env-<tier>-<nn>", envID)}
	}
	if err := checkMount("kv mount", kvMount); err != nil {
		return "", &Error{Op: "secret-path", Kind: ErrSecretPath, Detail: err.Error()}
	}
	if err := checkRelPath(path); err != nil {
		return "", &Error{Op: "secret-path", Kind: ErrSecretPath, Detail: err.Error()}
	}
	return kvMount + "/data/envs/" + envID + "/" + path, nil
}

// checkMount checks a mount name (which may have several segments, e.g. "kv/team").
func checkMount(what, mount string) error {
	if mount == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if err := checkSegments(mount); err != nil {
		return fmt.Errorf("%s %q: %w", what, printable(mount), err)
	}
	return nil
}

// checkRelPath checks a secret path relative to the env root.
func checkRelPath(p string) error {
	if p == "" {
		return errors.New("the secret path is empty")
	}
	if err := checkSegments(p); err != nil {
		return fmt.Errorf("secret path %q: %w", printable(p), err)
	}
	return nil
}

func checkSegments(p string) error {
	switch {
	case !utf8.ValidString(p):
		return errors.New("is not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return errors.New("starts with /")
	case strings.ContainsRune(p, '\\'):
		return errors.New("holds a backslash")
	case hasControl(p):
		return errors.New("holds a control character")
	case strings.ContainsAny(p, "%?#"):
		return errors.New("holds one of % ? #")
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return errors.New("has an empty segment")
		case ".", "..":
			return fmt.Errorf("has a %q segment", seg)
		}
		if strings.TrimSpace(seg) != seg {
			return errors.New("has a segment with leading or trailing space")
		}
	}
	return nil
}

// printable replaces control characters so that a refused path can be quoted.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "?")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// kvWire is the answer of a KV v2 read.
type kvWire struct {
	Data *struct {
		Data     map[string]json.RawMessage `json:"data"`
		Metadata *struct {
			DeletionTime string `json:"deletion_time"`
			Destroyed    bool   `json:"destroyed"`
			Version      int    `json:"version"`
		} `json:"metadata"`
	} `json:"data"`
}

// kvData is a decoded KV v2 read: the data (nil for a deleted or destroyed version)
// and why it is nil.
type kvData struct {
	data   map[string]json.RawMessage
	absent string // why there is no data: "" when data is present
}

// decodeKV decodes the body of a KV v2 read (200, or a 404 that still carries the
// metadata of a deleted version).
func decodeKV(body []byte) (kvData, error) {
	var w kvWire
	if len(bytes.TrimSpace(body)) == 0 {
		return kvData{absent: "the secret does not exist"}, nil
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return kvData{}, errors.New("malformed KV v2 response")
	}
	switch {
	case w.Data == nil:
		return kvData{absent: "the secret does not exist"}, nil
	case w.Data.Metadata != nil && w.Data.Metadata.Destroyed:
		return kvData{absent: fmt.Sprintf("version %d of the secret was destroyed", w.Data.Metadata.Version)}, nil
	case w.Data.Metadata != nil && w.Data.Metadata.DeletionTime != "":
		return kvData{absent: fmt.Sprintf("version %d of the secret was deleted", w.Data.Metadata.Version)}, nil
	case w.Data.Data == nil:
		return kvData{absent: "the secret has no data"}, nil
	}
	return kvData{data: w.Data.Data}, nil
}

// value turns a KV value into the string an env var gets: a JSON string as is,
// a number or a boolean as its JSON text. null, objects and arrays are refused.
func value(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		return s, true
	case 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", false
		}
		if v == nil {
			return "", false
		}
		return string(raw), true
	}
	return "", false
}

// readOp is the Op of the errors of Read.
const readOp = "read"

// Read reads the secrets refs names, by variable name, with token: one GET per
// distinct path, each pinned to the Client's env (SecretPath). Every value is
// registered with Config.Secrets as soon as it is decoded. A reference that leaves
// the env root is ErrSecretPath (checked for all refs before any request); a 403 is
// ErrSecretDenied; a missing path, a deleted or destroyed latest version or a missing
// key is ErrSecretMissing, and every missing variable is reported (errors.Join, in
// variable order). Errors name variables, paths and keys, never values.
func (c *Client) Read(ctx context.Context, token secret.Value, refs map[string]Ref) (map[string]secret.Value, error) {
	c.secrets.Add(token.Reveal())
	paths, byPath, err := c.groupByPath(refs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]secret.Value, len(refs))
	var missing []error
	for _, p := range paths {
		vars := byPath[p]
		d, status, err := c.readPath(ctx, token, p, vars)
		if err != nil {
			return nil, err
		}
		missing = append(missing, pick(refs, vars, d, p, status, out)...)
	}
	switch len(missing) {
	case 0:
		return out, nil
	case 1:
		return nil, missing[0]
	}
	return nil, errors.Join(missing...)
}

// groupByPath checks every reference and groups the variables by API path, so that
// each secret is read once; paths keeps the order of the sorted variable names.
func (c *Client) groupByPath(refs map[string]Ref) (paths []string, byPath map[string][]string, err error) {
	names := slices.Sorted(maps.Keys(refs))
	byPath = map[string][]string{}
	for _, name := range names {
		ref := refs[name]
		p, err := SecretPath(c.kvMount, c.envID, ref.Path)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Op, e.Var = readOp, name
			}
			return nil, nil, err
		}
		if ref.Key == "" {
			return nil, nil, &Error{Op: readOp, Kind: ErrSecretPath, Var: name, Path: p, Detail: "the secret reference names no key"}
		}
		if _, ok := byPath[p]; !ok {
			paths = append(paths, p)
		}
		byPath[p] = append(byPath[p], name)
	}
	return paths, byPath, nil
}

// readPath reads one KV v2 secret and registers every value in it with the redactor.
// A missing or deleted secret is a kvData with absent set, not an error.
func (c *Client) readPath(ctx context.Context, token secret.Value, p string, vars []string) (kvData, int, error) {
	r, err := c.call(ctx, readOp, http.MethodGet, p, token, nil)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Var = strings.Join(vars, ",")
		}
		return kvData{}, 0, err
	}
	if r.status != http.StatusOK && r.status != http.StatusNotFound {
		e := statusError(readOp, p, r, ErrSecretDenied, token.Reveal())
		e.Var = strings.Join(vars, ",")
		if errors.Is(e.Kind, ErrSecretDenied) {
			e.Detail = "the token's policy does not allow reading this path"
		}
		return kvData{}, r.status, e
	}
	d, derr := decodeKV(r.body)
	if derr != nil {
		return kvData{}, r.status, &Error{Op: readOp, Kind: ErrUnavailable, Var: strings.Join(vars, ","), Path: p,
			Status: r.status, Detail: derr.Error()}
	}
	if r.status == http.StatusNotFound && d.absent == "" {
		d = kvData{absent: "the secret does not exist"}
	}
	// Register every value of the secret first: the whole data was decoded.
	for _, raw := range d.data {
		if s, ok := value(raw); ok {
			c.secrets.Add(s)
		}
	}
	return d, r.status, nil
}

// pick takes each variable's key out of a secret into out, and returns a
// SECRET_MISSING error for every variable it cannot satisfy.
func pick(refs map[string]Ref, vars []string, d kvData, p string, status int, out map[string]secret.Value) []error {
	var missing []error
	miss := func(name, detail string) {
		missing = append(missing, &Error{Op: readOp, Kind: ErrSecretMissing, Var: name, Path: p, Status: status, Detail: detail})
	}
	for _, name := range vars {
		key := refs[name].Key
		if d.absent != "" {
			miss(name, d.absent)
			continue
		}
		raw, ok := d.data[key]
		if !ok {
			miss(name, fmt.Sprintf("the secret has no key %q", printable(key)))
			continue
		}
		s, ok := value(raw)
		if !ok {
			miss(name, fmt.Sprintf("key %q is not a string, number or boolean", printable(key)))
			continue
		}
		out[name] = secret.New(s)
	}
	return missing
}
