package faketenancy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// DefaultCompose is the compose file BuildBundle uses when BundleSpec.Files is empty.
const DefaultCompose = "services:\n  app:\n    image: registry.monky.internal/app:1\n"

// SecretRef names a secret of a bundle manifest: a path under the environment's root
// and a key of that KV v2 secret.
type SecretRef struct {
	// Path of the secret under the environment's root, e.g. "db".
	Path string `json:"path"`
	// Key within the secret's data.
	Key string `json:"key"`
}

// BundleSpec describes a bundle for BuildBundle. Zero values are documented defaults.
type BundleSpec struct {
	// EnvID is manifest.env_id (required).
	EnvID string
	// Serial is manifest.serial; default 1.
	Serial int64
	// Files are the bundle's files besides manifest.json, path → content; default
	// {"compose.yaml": DefaultCompose}.
	Files map[string]string
	// ComposeFiles is manifest.compose_files; default ["compose.yaml"].
	ComposeFiles []string
	// Vars is manifest.vars.
	Vars map[string]string
	// Secrets is manifest.secrets.
	Secrets map[string]SecretRef
	// MinFreeMB is manifest.min_free_mb.
	MinFreeMB int64
	// Gzip compresses the tar.
	Gzip bool
	// Restore is manifest.restore ("safe", "unsafe"); with Hooks, it makes the
	// manifest schema 2.
	Restore string
	// Hooks is manifest.hooks; nil: none.
	Hooks *HooksSpec
}

// HooksSpec is manifest.hooks (docs/BUNDLE.md, "Hooks").
type HooksSpec struct {
	BeforeSwitch []HookSpec `json:"before_switch,omitempty"`
	AfterSwitch  []HookSpec `json:"after_switch,omitempty"`
}

// HookSpec is one hook of manifest.hooks.
type HookSpec struct {
	Service        string `json:"service"`
	TimeoutSeconds int    `json:"timeout_s,omitempty"`
	Repeatable     bool   `json:"repeatable,omitempty"`
}

// Bundle is a bundle built by BuildBundle.
type Bundle struct {
	// Data is the tar (or tar.gz) as tenancy serves it.
	Data []byte
	// SHA is the bundle sha (docs/BUNDLE.md), computed from the file contents,
	// independently of the tar.
	SHA string
	// Manifest is the manifest.json written into the tar.
	Manifest []byte
}

type manifest struct {
	Schema       int                  `json:"schema"`
	EnvID        string               `json:"env_id"`
	Serial       int64                `json:"serial"`
	ComposeFiles []string             `json:"compose_files"`
	Files        []string             `json:"files"`
	Vars         map[string]string    `json:"vars"`
	Secrets      map[string]SecretRef `json:"secrets"`
	MinFreeMB    int64                `json:"min_free_mb,omitempty"`
	Restore      string               `json:"restore,omitempty"`
	Hooks        *HooksSpec           `json:"hooks,omitempty"`
}

// BuildBundle builds a bundle as docs/BUNDLE.md describes it: manifest.json listing
// every file, and the files, in a tar with fixed metadata (sorted entries, their
// directories, one mtime) so that the same spec gives the same bytes. It fails when
// EnvID is empty or Files holds manifest.json.
func BuildBundle(spec BundleSpec) (Bundle, error) {
	if spec.EnvID == "" {
		return Bundle{}, fmt.Errorf("faketenancy: BuildBundle: BundleSpec.EnvID is required")
	}
	files := spec.Files
	if len(files) == 0 {
		files = map[string]string{"compose.yaml": DefaultCompose}
	}
	if _, ok := files["manifest.json"]; ok {
		return Bundle{}, fmt.Errorf("faketenancy: BuildBundle: BundleSpec.Files must not hold manifest.json")
	}
	mdata, err := json.MarshalIndent(manifestOf(spec, files), "", "  ")
	if err != nil {
		return Bundle{}, err
	}
	all := map[string][]byte{"manifest.json": mdata}
	for p, c := range files {
		all[p] = []byte(c)
	}
	data, err := writeTar(all, spec.Gzip)
	if err != nil {
		return Bundle{}, err
	}
	return Bundle{Data: data, SHA: listingSHA(sums(all)), Manifest: mdata}, nil
}

// manifestOf is the manifest of spec with its defaults, listing files.
func manifestOf(spec BundleSpec, files map[string]string) manifest {
	m := manifest{
		Schema: 1, EnvID: spec.EnvID, Serial: spec.Serial, ComposeFiles: spec.ComposeFiles,
		Vars: spec.Vars, Secrets: spec.Secrets, MinFreeMB: spec.MinFreeMB,
		Restore: spec.Restore, Hooks: spec.Hooks,
	}
	if m.Restore != "" || m.Hooks != nil {
		m.Schema = 2
	}
	if m.Serial == 0 {
		m.Serial = 1
	}
	if m.ComposeFiles == nil {
		m.ComposeFiles = []string{"compose.yaml"}
	}
	if m.Vars == nil {
		m.Vars = map[string]string{}
	}
	if m.Secrets == nil {
		m.Secrets = map[string]SecretRef{}
	}
	m.Files = slices.Sorted(maps.Keys(files))
	return m
}

// writeTar writes all as a tar (gzip-compressed when gz) with fixed metadata and the
// entries sorted by path, each parent directory before its files.
func writeTar(all map[string][]byte, gz bool) ([]byte, error) {
	names := slices.Sorted(maps.Keys(all))
	var buf bytes.Buffer
	var zw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	}
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dirs := map[string]bool{}
	for _, p := range names {
		for i := range len(p) {
			if p[i] == '/' && !dirs[p[:i]] {
				dirs[p[:i]] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p[:i] + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
					return nil, err
				}
			}
		}
		c := all[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(c)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(c); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
