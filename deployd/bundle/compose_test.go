package bundle

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// composeBundle is the good bundle with compose.yaml replaced by content and,
// optionally, extra files (listed in files).
func composeBundle(content string, extra ...ent) func(tb testing.TB) []byte {
	return func(tb testing.TB) []byte {
		m := goodManifest()
		for _, e := range extra {
			m.Files = append(m.Files, e.name)
		}
		ents := []ent{manifestEnt(tb, m), file("compose.yaml", content), file("config/app.toml", "")}
		return tarOf(tb, append(ents, extra...)...)
	}
}

// composeCases run in TestVerifyRefusals with refusalCases.
func composeCases() []refusalCase {
	return []refusalCase{
		{name: "compose not YAML", data: composeBundle("services: [\n"), codes: []codes.Code{codes.ComposeInvalid}, detail: "compose.yaml"},
		{name: "compose schema violation", data: composeBundle("services:\n  app:\n    image: x\n    restart: 12\n    ports: {a: b}\n"), codes: []codes.Code{codes.ComposeInvalid}},
		{name: "unresolved variable", data: composeBundle("services:\n  app:\n    image: x:${TAG}\n"), codes: []codes.Code{codes.UnresolvedVars}, detail: "TAG"},
		{name: "privileged", data: composeBundle("services:\n  app:\n    image: x\n    privileged: true\n"), codes: []codes.Code{codes.Privileged}, detail: "app"},
		{name: "docker socket", data: composeBundle("services:\n  app:\n    image: x\n    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n"), codes: []codes.Code{codes.Privileged}, detail: "app"},
		{name: "host network", data: composeBundle("services:\n  app:\n    image: x\n    network_mode: host\n"), codes: []codes.Code{codes.Privileged}, detail: "app"},
		{name: "build context holding the .env of a bundle with secrets", data: composeBundle("services:\n  app:\n    build: .\n"),
			codes: []codes.Code{codes.Privileged}, detail: "service app: build.context . sends the release's .env"},
		{name: "build context whose .dockerignore lets .env through", data: composeBundle("services:\n  app:\n    build: .\n", file(".dockerignore", "*\n!.env\n")),
			codes: []codes.Code{codes.Privileged}, detail: ".dockerignore does not exclude it"},
		{name: "env_file outside the bundle", data: composeBundle("services:\n  app:\n    image: x\n    env_file: ../../etc/environment\n"), codes: []codes.Code{codes.ManifestPaths}, detail: "env_file"},
	}
}

func TestVerifyComposeAccepts(t *testing.T) {
	tests := []struct {
		name     string
		data     func(tb testing.TB) []byte
		exp      func(*Expect)
		services []string
	}{
		{"good", func(tb testing.TB) []byte { return goodTar(tb) }, nil, []string{"app"}},
		{"allowed privileged", composeBundle("services:\n  app:\n    image: x\n    privileged: true\n  db:\n    image: y\n"),
			func(e *Expect) { e.AllowPrivileged = []string{"app"} }, []string{"app", "db"}},
		{"default in the expression", composeBundle("services:\n  app:\n    image: x:${TAG:-latest}\n"), nil, []string{"app"}},
		{"env_file in the bundle", composeBundle("services:\n  app:\n    image: x\n    env_file: app.env\n", file("app.env", "A=1\n")), nil, []string{"app"}},
		// The .dockerignore comes after manifest.json and compose.yaml and is not named in
		// them: it must still be kept for the build-context check.
		{"build context with a .dockerignore that excludes .env", composeBundle("services:\n  app:\n    build: .\n",
			file(".dockerignore", "node_modules\n.env\n")), nil, []string{"app"}},
		{"build context with Dockerfile.dockerignore", composeBundle("services:\n  app:\n    build:\n      context: .\n      dockerfile: docker/Dockerfile\n",
			file("docker/Dockerfile", "FROM alpine\nCOPY . /app\n"), file("docker/Dockerfile.dockerignore", "**/.env\n")), nil, []string{"app"}},
		{"several compose files", func(tb testing.TB) []byte {
			m := goodManifest()
			m.ComposeFiles = []string{"compose.yaml", "override.yaml"}
			m.Files = append(m.Files, "override.yaml")
			return tarOf(tb, file("override.yaml", "services:\n  worker:\n    image: w\n"), manifestEnt(tb, m),
				file("compose.yaml", goodCompose), file("config/app.toml", ""))
		}, nil, []string{"app", "worker"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := verifyWith(tt.data(t), tt.exp)
			require.NoError(t, err)
			assert.Equal(t, tt.services, res.Services)
		})
	}
}

func TestFindingCode(t *testing.T) {
	for _, c := range []codes.Code{codes.ComposeInvalid, codes.UnresolvedVars, codes.Privileged, codes.ManifestPaths} {
		assert.Equal(t, c, findingCode(c))
	}
	assert.Equal(t, codes.ComposeInvalid, findingCode("SOMETHING_NEW"))
}

// Compose's own warnings come back in Result.Warnings, naming the bundle's file; they
// refuse nothing.
func TestVerifyWarnings(t *testing.T) {
	const obsolete = "compose.yaml: the attribute `version` is obsolete, it will be ignored, please remove it to avoid potential confusion"
	res, err := Verify(context.Background(), bytes.NewReader(composeBundle("version: \"3.8\"\n"+goodCompose)(t)), expect())
	require.NoError(t, err)
	assert.Equal(t, []string{obsolete}, res.Warnings)

	res, err = Verify(context.Background(), bytes.NewReader(composeBundle("version: \"3.8\"\nservices:\n  app:\n    image: x\n    privileged: true\n")(t)), expect())
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, []string{obsolete}, res.Warnings, "a refused bundle has its warnings too")

	res, err = Verify(context.Background(), bytes.NewReader(goodTar(t)), expect())
	require.NoError(t, err)
	assert.Equal(t, []string{}, res.Warnings, "a list, never null")
}
