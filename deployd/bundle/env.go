package bundle

import (
	"fmt"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/envfile"
)

// RenderEnv returns the content of a release's .env file for vars (the manifest's
// vars plus the secret values the agent read): one NAME=value line per variable,
// sorted by name, quoted so that compose's own dotenv parser reads back exactly the
// value. A name that is not a variable name, or a value that cannot be represented
// (a NUL byte, for example), is an error that names the variable, never the value.
//
// RenderEnv does not add COMPOSE_PROJECT_NAME: the agent adds it to vars itself.
// Write the result with mode 0600: it holds secret values.
func RenderEnv(vars map[string]string) ([]byte, error) {
	b, err := envfile.Render(vars)
	if err != nil {
		return nil, fmt.Errorf("bundle: rendering .env: %w", err)
	}
	return b, nil
}

// checkVarsRenderable refuses each manifest var whose value RenderEnv could not
// write, so that a bundle that could never be applied is refused before the lease.
func checkVarsRenderable(vars map[string]string, rs *refusals) {
	for name, v := range vars {
		if envfile.ValidName(name) {
			if _, err := envfile.Render(map[string]string{name: v}); err != nil {
				rs.add(codes.BundleMalformed, "%s: vars: %q: the value cannot be written to .env", ManifestName, name)
			}
		}
	}
}
