package composecheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/monky/monky-deployd/internal/envfile"
)

// SecretPlaceholder is the value every secret name takes when a project is loaded
// without OpenBao (Check and LoadProject): set, non-empty, the same on every load, so
// that two loads of releases whose secrets are the same names compare equal.
const SecretPlaceholder = secretPlaceholder

// ProjectInput is what LoadProject loads: a release's compose files as the agent runs
// them. The caller has verified them (Check); LoadProject refuses nothing itself.
type ProjectInput struct {
	// Files maps a bundle path to its content: at least the compose files.
	Files map[string][]byte
	// ReadFile returns the content of another bundle path, for the env_file entries of
	// the services (read after the load, as compose does). Nil: only Files.
	ReadFile func(path string) ([]byte, error)
	// ComposeFiles is manifest.compose_files, in order.
	ComposeFiles []string
	// Vars holds the manifest.vars values.
	Vars map[string]string
	// SecretNames are the names of manifest.secrets; each takes SecretPlaceholder.
	SecretNames []string
	// ProjectName is the compose project name (required).
	ProjectName string
	// Dir is the absolute project directory compose runs the release in (the agent:
	// releases/<sha>); relative paths resolve under it. Nothing is read from it.
	Dir string
}

// LoadProject loads the compose files of in the way `docker compose up` loads them in
// the release directory (docker/compose v2 cmd/compose: resolved paths, the explicit
// environment, then every service's environment resolved and its env_file entries
// merged and discarded), from memory. The rendered .env is the manifest's vars and
// the secret names with SecretPlaceholder: no secret value is ever read. The services
// of the result are those `up` starts (profiles and jobs left out), so that
// types.ServiceConfig values compare as compose's config hash compares them.
func LoadProject(ctx context.Context, in ProjectInput) (*types.Project, error) {
	if in.ProjectName == "" || !filepath.IsAbs(in.Dir) {
		return nil, errors.New("composecheck: LoadProject needs a project name and an absolute directory")
	}
	c := &checker{in: Input{Files: in.Files, ComposeFiles: in.ComposeFiles, Vars: in.Vars, SecretNames: in.SecretNames, ProjectName: in.ProjectName},
		dir: filepath.Clean(in.Dir)}
	var files []types.ConfigFile
	for _, name := range in.ComposeFiles {
		content, ok := in.Files[name]
		if !ok {
			return nil, fmt.Errorf("compose file %s is not in the release", name)
		}
		files = append(files, types.ConfigFile{Filename: name, Content: content})
	}
	project, err := c.load(ctx, files, c.lookup())
	if err != nil {
		// compose-go's text may quote a value: name the files only.
		return nil, fmt.Errorf("the compose files %s do not load", strings.Join(in.ComposeFiles, ", "))
	}
	env := c.environment()
	env["COMPOSE_PROJECT_NAME"] = in.ProjectName
	for name, s := range project.Services {
		if err := c.resolveEnvironment(&s.ContainerSpec, env, in); err != nil {
			return nil, fmt.Errorf("service %s: %w", name, err)
		}
		for j := range s.PreStart {
			if len(s.PreStart[j].Environment) == 0 && len(s.PreStart[j].EnvFiles) == 0 {
				continue
			}
			if err := c.resolveEnvironment(&s.PreStart[j].ContainerSpec, env, in); err != nil {
				return nil, fmt.Errorf("service %s: pre_start: %w", name, err)
			}
		}
		project.Services[name] = s
	}
	return project, nil
}

// resolveEnvironment is compose-go's resolveEnvironment (types/project.go, v2.16.2)
// with the env files read from the release rather than the disk: names without a
// value are looked up in the project environment, env files are merged under the
// explicit environment, and env_file is discarded (compose's up does the same).
func (c *checker) resolveEnvironment(spec *types.ContainerSpec, projectEnv types.Mapping, in ProjectInput) error {
	spec.Environment = spec.Environment.Resolve(projectEnv.Resolve)
	environment := spec.Environment.ToMapping()
	for _, ef := range spec.EnvFiles {
		rel, ok := c.inRelease(ef.Path)
		if !ok {
			return fmt.Errorf("env_file outside the release")
		}
		content, err := c.envFileContent(rel, projectEnv, in)
		if err != nil {
			if ef.Required {
				return fmt.Errorf("env_file %s: %w", rel, err)
			}
			continue
		}
		err = dotenv.ParseWithFormat(bytes.NewReader(content), rel, environment, func(k string) (string, bool) {
			if v, ok := projectEnv.Resolve(k); ok {
				return v, true
			}
			if v, ok := spec.Environment[k]; ok && v != nil {
				return *v, true
			}
			return "", false
		}, ef.Format)
		if err != nil {
			return fmt.Errorf("env_file %s does not parse", rel) // the parser's text may quote a line
		}
	}
	spec.Environment = environment.ToMappingWithEquals().OverrideBy(spec.Environment)
	spec.EnvFiles = nil
	return nil
}

// envFileContent is an env file's content: ".env" is the one the agent renders (vars
// and secret placeholders, in dotenv syntax compose reads back), any other a file of
// the release.
func (c *checker) envFileContent(rel string, projectEnv types.Mapping, in ProjectInput) ([]byte, error) {
	if rel == ".env" {
		data, err := envfile.Render(projectEnv)
		if err != nil {
			return nil, errors.New("the .env cannot be rendered") // the error names a variable's value's fault, not the value; keep it short
		}
		return data, nil
	}
	if content, ok := in.Files[rel]; ok {
		return content, nil
	}
	if in.ReadFile == nil {
		return nil, errors.New("not in the release")
	}
	return in.ReadFile(rel)
}
