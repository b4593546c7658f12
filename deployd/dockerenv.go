package deployd

import (
	"slices"
	"strings"
)

// dockerEnvNames are the variables DockerEnv passes on: the ones the docker CLI itself
// reads to find and reach the engine (and PATH, HOME to find its plugins and its
// config). No fake's variable is among them: a fake docker learns its paths another
// way (docs/FAKES.md).
var dockerEnvNames = []string{
	"PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH",
	"DOCKER_TLS_VERIFY", "DOCKER_API_VERSION",
}

// DockerEnvNames returns the names of the variables DockerEnv passes on, in a new
// slice.
func DockerEnvNames() []string { return slices.Clone(dockerEnvNames) }

// DockerEnv returns the environment docker compose runs with, built from the agent's
// own environ ("K=V", as os.Environ returns it): only the variables named by
// DockerEnvNames pass, the last one winning when a name repeats, and nothing else —
// compose interpolates from its environment, and what the agent verified must be what
// compose runs (a VAULT_TOKEN or a stray DB_PASSWORD of the agent's own environment
// never reaches a container). Without PATH in environ, DefaultDockerEnv's PATH is
// used. The result is meant for Options.DockerEnv; the agent binary builds it from its
// process environment.
func DockerEnv(environ []string) []string {
	vals := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && slices.Contains(dockerEnvNames, k) {
			vals[k] = v
		}
	}
	env := []string{}
	for _, k := range dockerEnvNames {
		if v, ok := vals[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := vals["PATH"]; !ok {
		env = append(env, DefaultDockerEnv()...)
	}
	return env
}
