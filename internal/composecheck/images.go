package composecheck

import (
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// Image is the image one service of the loaded model runs, as `docker compose up`
// would look for it.
type Image struct {
	// Service is the service's name.
	Service string
	// Ref is the image reference as interpolated ("" for a build service without an
	// image name).
	Ref string
	// PullPolicy is the service's pull_policy as written ("" when unset: compose's
	// default, missing).
	PullPolicy string
	// Build is true when the service has a build section: compose builds it, it is not
	// pulled.
	Build bool
	// FromSecret is true when the reference holds the value of a manifest secret,
	// known only after the OpenBao login.
	FromSecret bool
}

// images lists the image of every service of p, sorted by service.
func images(p *types.Project) []Image {
	out := make([]Image, 0, len(p.Services))
	for name, s := range p.Services {
		out = append(out, Image{
			Service:    name,
			Ref:        s.Image,
			PullPolicy: s.PullPolicy,
			Build:      s.Build != nil,
			FromSecret: strings.Contains(s.Image, secretPlaceholder),
		})
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Service, b.Service) })
	return out
}
