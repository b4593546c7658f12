package fakedocker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"
)

// defaultComposeFiles are looked for, in order, when no -f is given.
var defaultComposeFiles = []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"}

// projectFile reads the compose files just enough to learn the service names, which
// of them declare a healthcheck (one that is not disabled) and the image each names
// (services that name none are absent: compose builds them). Later files override
// earlier ones, as compose merges them. Relative files are taken from dir.
func projectFile(dir string, files []string) (services, healthchecks []string, images map[string]string, err error) {
	if len(files) == 0 {
		for _, name := range defaultComposeFiles {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				files = []string{name}
				break
			}
		}
		if len(files) == 0 {
			return nil, nil, nil, fmt.Errorf("no configuration file provided: not found in %s", dir)
		}
	}
	hc := map[string]bool{}
	profiled := map[string]bool{}
	images = map[string]string{}
	err = readComposeFiles(dir, files, func(services map[string]composeService) {
		for name, svc := range services {
			// Without a healthcheck section the service keeps what earlier files said.
			has := hc[name]
			if svc.Healthcheck != nil {
				has = !svc.Healthcheck.Disable
			}
			hc[name] = has
			if svc.Profiles != nil {
				// up without --profile leaves a service behind a profile out
				profiled[name] = len(svc.Profiles) > 0
			}
			if svc.Image != "" {
				images[name] = svc.Image
			}
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	for name, has := range hc {
		if profiled[name] {
			continue
		}
		services = append(services, name)
		if has {
			healthchecks = append(healthchecks, name)
		}
	}
	slices.Sort(services)
	slices.Sort(healthchecks)
	return services, healthchecks, images, nil
}

// serviceProfiles reads the profiles of every service of the compose files (later
// files override earlier ones).
func serviceProfiles(dir string, files []string) (map[string][]string, error) {
	out := map[string][]string{}
	err := readComposeFiles(dir, files, func(services map[string]composeService) {
		for name, s := range services {
			if _, ok := out[name]; !ok || s.Profiles != nil {
				out[name] = s.Profiles
			}
		}
	})
	return out, err
}

// composeService is what the fake reads of a service of a compose file.
type composeService struct {
	Image       string   `yaml:"image"`
	Profiles    []string `yaml:"profiles"`
	Healthcheck *struct {
		Disable bool `yaml:"disable"`
	} `yaml:"healthcheck"`
}

// readComposeFiles reads files in order (relative ones from dir) and hands the
// services of each to fn.
func readComposeFiles(dir string, files []string, fn func(services map[string]composeService)) error {
	for _, f := range files {
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err // "open <f>: no such file or directory", as compose says
		}
		var doc struct {
			Services map[string]composeService `yaml:"services"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		fn(doc.Services)
	}
	return nil
}
