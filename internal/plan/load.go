package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/internal/composecheck"
)

// maxComposeFile bounds what Load reads of a compose or env file into memory.
const maxComposeFile = 8 << 20

// Source is where a release's files are and how the agent runs it.
type Source struct {
	// SHA and Serial identify the release.
	SHA    string
	Serial int64
	// Files is the directory holding the release's files: the staged release, or a
	// verified bundle unpacked for the plan. Its .env is never read.
	Files string
	// Dir is the project directory the agent runs it in: releases/<sha>. It need not
	// exist.
	Dir string
	// Manifest is the release's manifest.
	Manifest bundle.Manifest
	// Project is the compose project name.
	Project string
	// Staged: Files is a staged release, whose containers carry the SourcesLabel
	// only when the agent wrote its bundle.LabelsFileName (releases staged before it
	// did have none). Otherwise Files is a bundle about to be staged, which gets it.
	Staged bool
}

// Load reads a release as compose would run it: its compose files loaded in
// src.Dir with the manifest's vars and a placeholder for each secret (no secret is
// read), and a digest of each file the manifest lists.
func Load(ctx context.Context, src Source) (*Side, error) {
	project, err := loadProject(ctx, src)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(src.Files)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }() // read-only
	digests := make(map[string]string, len(src.Manifest.Files))
	for _, name := range src.Manifest.Files {
		d, err := digest(root, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		digests[name] = d
	}
	side := &Side{SHA: src.SHA, Serial: src.Serial, Dir: filepath.Clean(src.Dir), Project: project, Files: digests}
	if _, err := root.Stat(bundle.LabelsFileName); src.Staged && err != nil {
		return side, nil
	}
	side.Sources = Sources(project, src.SHA)
	return side, nil
}

// Labels is the LabelsFile of the release whose files are in src.Files (the
// staging directory of src.Dir); nil when no service mounts configs or secrets. Only
// its compose files (and their env_file entries) are read.
func Labels(ctx context.Context, src Source) ([]byte, error) {
	project, err := loadProject(ctx, src)
	if err != nil {
		return nil, err
	}
	return LabelsFile(Sources(project, src.SHA)), nil
}

// loadProject loads the compose files of src from src.Files
// (composecheck.LoadProject).
func loadProject(ctx context.Context, src Source) (*types.Project, error) {
	root, err := os.OpenRoot(src.Files)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }() // read-only
	read := func(p string) ([]byte, error) { return readCapped(root, p) }
	files := map[string][]byte{}
	for _, name := range src.Manifest.ComposeFiles {
		b, err := read(name)
		if err != nil {
			return nil, fmt.Errorf("read compose file %s: %w", name, err)
		}
		files[name] = b
	}
	return composecheck.LoadProject(ctx, composecheck.ProjectInput{
		Files:        files,
		ReadFile:     read,
		ComposeFiles: src.Manifest.ComposeFiles,
		Vars:         maps.Clone(src.Manifest.Vars),
		SecretNames:  slices.Sorted(maps.Keys(src.Manifest.Secrets)),
		ProjectName:  src.Project,
		Dir:          src.Dir,
	})
}

func readCapped(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	b, err := io.ReadAll(io.LimitReader(f, maxComposeFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxComposeFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxComposeFile)
	}
	return b, nil
}

func digest(root *os.Root, name string) (string, error) {
	f, err := root.Open(filepath.FromSlash(name))
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read-only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
