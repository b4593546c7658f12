package bundle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Staged is a release as Extract left it in a directory: its manifest and the compose
// services its compose files define.
type Staged struct {
	// Manifest is the release's manifest.json, decoded and checked as Verify does.
	Manifest Manifest
	// Services are the compose services, sorted.
	Services []string
	// Images are the images of Services, sorted by service.
	Images []Image
}

// ReadStaged reads a staged release directory: manifest.json (decoded and checked as
// Verify checks it) and the compose files it names, from which it lists the services
// with the same compose loader as Verify. exp supplies ProjectName and
// AllowPrivileged; the other fields are not used. It is how an agent that resumes,
// restores or takes down a release learns what it runs, without the bundle.
func ReadStaged(ctx context.Context, dir string, exp Expect) (Staged, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return Staged{}, fmt.Errorf("read the release's %s: %w", ManifestName, err)
	}
	m, rs := decodeManifest(data)
	if len(rs) > 0 {
		return Staged{}, &RefusedError{Refusals: rs}
	}
	files := make(map[string][]byte, len(m.ComposeFiles))
	for _, f := range m.ComposeFiles {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return Staged{}, fmt.Errorf("read compose file %s of the release: %w", f, err)
		}
		files[f] = b
	}
	c := checkCompose(ctx, &m, files, exp)
	if len(c.services) == 0 {
		return Staged{Manifest: m}, errors.New("the release's compose files define no service")
	}
	return Staged{Manifest: m, Services: c.services, Images: c.images}, nil
}

// ParseManifest decodes and checks a manifest.json on its own, as Verify does; a bad
// one is a *RefusedError.
func ParseManifest(data []byte) (Manifest, error) {
	m, rs := decodeManifest(data)
	if len(rs) > 0 {
		return Manifest{}, &RefusedError{Refusals: rs}
	}
	return m, nil
}
