package composecheck

import (
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// ServiceInfo is what the agent's hooks need to know of one service of the loaded
// model, active or behind a profile (docs/BUNDLE.md, "Hooks").
type ServiceInfo struct {
	// Name is the service's name.
	Name string
	// Profiles are the service's profiles; empty: `docker compose up` starts it.
	Profiles []string
	// Restart is the service's restart policy: its restart key, or, when that is
	// unset, its deploy.restart_policy.condition ("any" is read as "always").
	Restart string
	// Image is the image the service runs, as Result.Images has it.
	Image Image
}

// OneShot reports whether the service ends by itself: no restart policy keeps it
// running (restart always or unless-stopped).
func (s ServiceInfo) OneShot() bool {
	switch s.Restart {
	case "always", "unless-stopped":
		return false
	}
	return true
}

// inventory lists every service of p, active or behind a profile, sorted by name.
func inventory(p *types.Project) []ServiceInfo {
	names, services := everyByName(p.Services, p.DisabledServices)
	out := make([]ServiceInfo, 0, len(names))
	for _, name := range names {
		s := services[name]
		restart := s.Restart
		if restart == "" && s.Deploy != nil && s.Deploy.RestartPolicy != nil {
			restart = s.Deploy.RestartPolicy.Condition
			if restart == "any" {
				restart = "always"
			}
		}
		out = append(out, ServiceInfo{
			Name:     name,
			Profiles: slices.Clone(s.Profiles),
			Restart:  restart,
			Image: Image{Service: name, Ref: s.Image, PullPolicy: s.PullPolicy, Build: s.Build != nil,
				FromSecret: strings.Contains(s.Image, secretPlaceholder)},
		})
	}
	return out
}
