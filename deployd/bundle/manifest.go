package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/monky/monky-deployd/internal/jsonerr"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
)

// ManifestName is the path of the manifest inside a bundle.
const ManifestName = "manifest.json"

// SchemaVersion is the newest manifest schema this package reads; it reads every
// schema from 1 up to it. Schema 2 (SchemaHooks) adds hooks and restore.
const SchemaVersion = SchemaHooks

// Manifest is manifest.json (docs/BUNDLE.md). Verify decodes it strictly: unknown or
// duplicate fields, fields spelled in another case, trailing data and wrong types
// are all BUNDLE_MALFORMED naming the field.
type Manifest struct {
	// Schema is the manifest schema: 1, or SchemaHooks (2) for a manifest with hooks
	// or restore.
	Schema int `json:"schema"`
	// EnvID is the environment the bundle was rendered for (env-<tier>-<nn>).
	EnvID string `json:"env_id"`
	// Serial increases with every bundle rendered for the env; it is at least 1.
	Serial int64 `json:"serial"`
	// ComposeFiles are the compose files, in the order compose loads them.
	ComposeFiles []string `json:"compose_files"`
	// Files lists every file of the bundle except manifest.json, exactly.
	Files []string `json:"files"`
	// Vars are plain variables written to the release's .env.
	Vars map[string]string `json:"vars,omitempty"`
	// Secrets maps a variable name to the OpenBao KV v2 secret that provides it.
	Secrets map[string]SecretRef `json:"secrets,omitempty"`
	// MinFreeMB is the free space (MiB) the release needs under deploy_dir; 0 = no
	// requirement beyond the box's own.
	MinFreeMB int64 `json:"min_free_mb,omitempty"`
	// Restore is RestoreSafe ("" reads as it) or RestoreUnsafe (schema 2).
	Restore string `json:"restore,omitempty"`
	// Hooks are the one-shot services run around the switch (schema 2); nil: none.
	Hooks *Hooks `json:"hooks,omitempty"`
}

// SecretRef names one key of one KV v2 secret under the env's root: the agent reads
// <kv_mount>/data/envs/<env_id>/<Path> and takes the field Key.
type SecretRef struct {
	// Path is relative to the env's root; see docs/BUNDLE.md for the rules.
	Path string `json:"path"`
	// Key is the field of the secret's data.
	Key string `json:"key"`
}

// manifestFields are the exact keys of a manifest, and whether each is required.
var manifestFields = map[string]bool{
	"schema": true, "env_id": true, "serial": true, "compose_files": true, "files": true,
	"vars": false, "secrets": false, "min_free_mb": false, "restore": false, "hooks": false,
}

var secretRefFields = map[string]bool{"path": true, "key": true}

// decodeManifest decodes and checks manifest.json on its own (without the tar's
// files). It returns the manifest and every refusal; the manifest is usable for
// further checks only when no BUNDLE_MALFORMED refusal came back.
func decodeManifest(data []byte) (Manifest, []Refusal) {
	var rs refusals
	var m Manifest
	if err := checkJSONKeys(data); err != nil {
		if n := peekSchema(data); n > SchemaVersion {
			// A newer renderer's fields are unknown here: the schema says why.
			rs.add(codes.BundleMalformed, "%s: schema is %d, this agent knows 1 to %d: upgrade the agent, or render for its schema", ManifestName, n, SchemaVersion)
			return m, rs.result()
		}
		rs.add(codes.BundleMalformed, "%s: %v", ManifestName, err)
		return m, rs.result()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		rs.add(codes.BundleMalformed, "%s: %s", ManifestName, describeJSONError(err))
		return m, rs.result()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		rs.add(codes.BundleMalformed, "%s: data after the JSON object", ManifestName)
		return m, rs.result()
	}
	m.check(&rs)
	return m, rs.result()
}

// peekSchema is the schema a manifest says it has, read loosely; 0 when it says none
// that reads as an integer.
func peekSchema(data []byte) int {
	var p struct {
		Schema int `json:"schema"`
	}
	_ = json.Unmarshal(data, &p) // a manifest that does not decode says no schema
	return p.Schema
}

// check adds the refusals of a decoded manifest on its own.
func (m *Manifest) check(rs *refusals) {
	bad := func(format string, args ...any) {
		rs.add(codes.BundleMalformed, ManifestName+": "+format, args...)
	}
	if m.Schema < 1 || m.Schema > SchemaVersion {
		bad("schema is %d, this agent knows 1 to %d: upgrade the agent, or render for its schema", m.Schema, SchemaVersion)
	}
	m.checkHooks(rs)
	if !ids.ValidEnvID(m.EnvID) {
		bad("env_id %q does not match %s", m.EnvID, ids.EnvIDPattern)
	}
	if m.Serial < 1 {
		bad("serial is %d, must be at least 1", m.Serial)
	}
	if m.MinFreeMB < 0 {
		bad("min_free_mb is %d, must not be negative", m.MinFreeMB)
	}
	if len(m.ComposeFiles) == 0 {
		bad("compose_files is empty")
	}
	files := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		switch why := checkPath(f); {
		case why != "":
			rs.add(codes.ManifestPaths, "files: %q: %s", f, why)
		case f == ManifestName:
			rs.add(codes.ManifestPaths, "files: lists %s, which is never listed", ManifestName)
		case reservedPath(f) != "":
			rs.add(codes.ManifestPaths, "files: %q: %s", f, reservedPath(f))
		case files[f]:
			rs.add(codes.ManifestPaths, "files: %q is listed twice", f)
		}
		files[f] = true
	}
	seen := make(map[string]bool, len(m.ComposeFiles))
	for _, f := range m.ComposeFiles {
		switch why := checkPath(f); {
		case why != "":
			rs.add(codes.ManifestPaths, "compose_files: %q: %s", f, why)
		case seen[f]:
			rs.add(codes.ManifestPaths, "compose_files: %q is listed twice", f)
		case !files[f]:
			rs.add(codes.ManifestPaths, "compose_files: %q is not in files", f)
		}
		seen[f] = true
	}
	for _, name := range slices.Sorted(maps.Keys(m.Vars)) {
		if why := checkEnvName(name); why != "" {
			bad("vars: %q %s", name, why)
		}
		if _, dup := m.Secrets[name]; dup {
			bad("%q is in both vars and secrets", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Secrets)) {
		ref := m.Secrets[name]
		if why := checkEnvName(name); why != "" {
			bad("secrets: %q %s", name, why)
		}
		if why := checkSecretPath(ref.Path); why != "" {
			rs.add(codes.SecretPath, "secrets: %s: %q: %s", name, ref.Path, why)
		}
		switch {
		case ref.Key == "":
			bad("secrets: %s: key is empty", name)
		case !utf8.ValidString(ref.Key) || strings.ContainsFunc(ref.Key, isControl):
			bad("secrets: %s: key is not printable UTF-8", name)
		}
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// checkJSONKeys walks the JSON tokens of a manifest and rejects what
// encoding/json would silently accept: duplicate keys (the last would win), keys
// in another case (encoding/json matches case-insensitively), missing required
// keys, and a top-level value that is not an object.
func checkJSONKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %s", describeJSONError(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		if _, known := manifestFields[key]; !known {
			return fmt.Errorf("unknown field %q", key)
		}
		if seen[key] {
			return fmt.Errorf("field %q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "vars":
			err = walkObject(dec, key, func(name string) error { return skipValue(dec) })
		case "secrets":
			err = walkObject(dec, key, func(name string) error {
				return checkSecretRefKeys(dec, "secrets."+name)
			})
		case "hooks":
			err = checkHooksKeys(dec)
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(manifestFields)) {
		if manifestFields[k] && !seen[k] {
			return fmt.Errorf("field %q is missing", k)
		}
	}
	return nil
}

func checkSecretRefKeys(dec *json.Decoder, field string) error {
	seen := map[string]bool{}
	if err := walkObject(dec, field, func(key string) error {
		if !secretRefFields[key] {
			return fmt.Errorf("unknown field %q", field+"."+key)
		}
		if seen[key] {
			return fmt.Errorf("field %q appears twice", field+"."+key)
		}
		seen[key] = true
		return skipValue(dec)
	}); err != nil {
		return err
	}
	for _, k := range []string{"key", "path"} {
		if !seen[k] {
			return fmt.Errorf("field %q is missing", field+"."+k)
		}
	}
	return nil
}

// walkObject reads an object (or null) and calls each for every key, with the
// decoder positioned at the key's value. Duplicate keys are refused.
func walkObject(dec *json.Decoder, field string, each func(key string) error) error {
	if open, err := openValue(dec, field, '{', "an object"); !open || err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		if seen[key] {
			return fmt.Errorf("field %q appears twice", field+"."+key)
		}
		seen[key] = true
		if err := each(key); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// openValue reads the token that opens field's value (walkArray, walkObject): false
// for null, an error for anything but the delimiter open, which makes the value
// what ("an array", "an object").
func openValue(dec *json.Decoder, field string, open json.Delim, what string) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, fmt.Errorf("field %q: %s", field, describeJSONError(err))
	}
	if tok == nil {
		return false, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != open {
		return false, fmt.Errorf("field %q must be %s", field, what)
	}
	return true, nil
}

func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", fmt.Errorf("not JSON: %s", describeJSONError(err))
	}
	key, ok := tok.(string)
	if !ok {
		return "", errors.New("not JSON: object key is not a string")
	}
	return key, nil
}

// skipValue consumes one JSON value of any kind.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %s", describeJSONError(err))
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// describeJSONError names the field of a type error and hides the offending value
// (a value in the manifest may be something the author did not mean to publish).
func describeJSONError(err error) string { return jsonerr.Describe(err) }
