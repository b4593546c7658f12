package bundle

import (
	"context"
	"maps"
	"slices"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/composecheck"
)

// Image is the image one compose service runs, as `docker compose up` looks for it:
// what the agent pulls before it asks for a lease (docs/ARCHITECTURE.md, "Images
// before the lease").
type Image struct {
	// Service is the compose service.
	Service string `json:"service"`
	// Ref is the image reference, interpolated with the manifest's vars; "" for a
	// build service that names no image.
	Ref string `json:"ref,omitempty"`
	// PullPolicy is the service's pull_policy as written; "" is compose's default
	// (missing).
	PullPolicy string `json:"pull_policy,omitempty"`
	// Build is true for a service with a build section: compose builds its image.
	Build bool `json:"build,omitempty"`
	// FromSecret is true when Ref holds the value of a manifest secret, known only
	// after the OpenBao login.
	FromSecret bool `json:"from_secret,omitempty"`
}

// composed is what the compose checks found.
type composed struct {
	services []string
	refusals []Refusal
	warnings []string
	images   []Image
	every    []composecheck.ServiceInfo
}

// checkCompose runs the compose checks (compose-spec validity, unresolved variables,
// privileges, env_file paths, build contexts) over the kept files and maps the
// findings to refusals, with the services, their images and compose's warnings.
func checkCompose(ctx context.Context, m *Manifest, files map[string][]byte, exp Expect) composed {
	project := exp.ProjectName
	if project == "" {
		project = composeProject
	}
	res := composecheck.Check(ctx, composecheck.Input{
		Files:           files,
		ComposeFiles:    slices.Clone(m.ComposeFiles),
		BundleFiles:     slices.Clone(m.Files),
		Vars:            maps.Clone(m.Vars),
		SecretNames:     slices.Sorted(maps.Keys(m.Secrets)),
		AllowPrivileged: slices.Clone(exp.AllowPrivileged),
		ProjectName:     project,
	})
	out := make([]Refusal, 0, len(res.Findings))
	for _, f := range res.Findings {
		out = append(out, Refusal{Code: findingCode(f.Code), Detail: f.Detail})
	}
	imgs := make([]Image, 0, len(res.Images))
	for _, im := range res.Images {
		imgs = append(imgs, imageOf(im))
	}
	for _, h := range m.AllHooks() {
		// A hook's image is pulled before the lease too: `compose run` would pull it
		// after the lease otherwise.
		for _, s := range res.Every {
			if s.Name == h.Service && !slices.ContainsFunc(imgs, func(i Image) bool { return i.Service == s.Name }) {
				imgs = append(imgs, imageOf(s.Image))
			}
		}
	}
	return composed{services: res.Services, refusals: out, warnings: res.Warnings, images: imgs, every: res.Every}
}

// imageOf is the Image of a composecheck image.
func imageOf(im composecheck.Image) Image {
	ref := im.Ref
	if im.FromSecret {
		ref = "" // never the placeholder that stands in for the secret
	}
	return Image{Service: im.Service, Ref: ref, PullPolicy: im.PullPolicy, Build: im.Build, FromSecret: im.FromSecret}
}

// findingCode maps a composecheck finding code to a refusal code. A code this
// package does not know is reported as COMPOSE_INVALID rather than dropped.
func findingCode(c codes.Code) codes.Code {
	switch c {
	case codes.ComposeInvalid, codes.UnresolvedVars, codes.Privileged, codes.ManifestPaths:
		return c
	}
	return codes.ComposeInvalid
}
