package fakedocker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"
)

// defaultComposeFiles are looked for, in order, when no -f is given.
var defaultComposeFiles = []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"}

// projectServices reads the compose files just enough to learn the service names and
// which of them declare a healthcheck (one that is not disabled). Later files override
// earlier ones, as compose merges them. Relative files are taken from dir.
func projectServices(dir string, files []string) (services, healthchecks []string, err error) {
	services, healthchecks, _, err = projectFile(dir, files)
	return services, healthchecks, err
}

// projectFile is projectServices that also returns the image each service names
// (services that name none are absent: compose builds them).
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
	for _, f := range files {
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil, fmt.Errorf("open %s: no such file or directory", f)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		var doc struct {
			Services map[string]struct {
				Image       string   `yaml:"image"`
				Profiles    []string `yaml:"profiles"`
				Healthcheck *struct {
					Disable bool `yaml:"disable"`
				} `yaml:"healthcheck"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		for name, svc := range doc.Services {
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
