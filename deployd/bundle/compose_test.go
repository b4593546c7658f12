package bundle

import (
	"bytes"
	"context"
	"encoding/json"
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

// hookBundle is the good bundle at schema 2 with compose.yaml replaced by content and
// the manifest changed by edit.
func hookBundle(content string, edit func(m *Manifest)) func(tb testing.TB) []byte {
	return func(tb testing.TB) []byte {
		m := goodManifest()
		m.Schema = SchemaHooks
		edit(&m)
		return tarOf(tb, manifestEnt(tb, m), file("compose.yaml", content), file("config/app.toml", ""))
	}
}

const hookCompose = `services:
  app:
    image: x
  backup:
    image: backup:1
    profiles: [monky-hooks]
  smoke:
    image: smoke:1
    profiles: [monky-hooks]
    restart: "no"
  worker:
    image: w
    restart: always
  daemon:
    image: d
    profiles: [monky-hooks]
    restart: unless-stopped
  swarmy:
    image: s
    profiles: [monky-hooks]
    deploy:
      restart_policy:
        condition: any
  plain:
    image: p
`

func before(svcs ...string) func(m *Manifest) {
	return func(m *Manifest) {
		m.Hooks = &Hooks{}
		for _, s := range svcs {
			m.Hooks.BeforeSwitch = append(m.Hooks.BeforeSwitch, Hook{Service: s})
		}
	}
}

// hookCases run in TestVerifyRefusals with refusalCases.
func hookCases() []refusalCase {
	hookInvalid := []codes.Code{codes.HookInvalid}
	hooks := func(h Hooks) func(m *Manifest) { return func(m *Manifest) { m.Hooks = &h } }
	malformed := []codes.Code{codes.BundleMalformed}
	return []refusalCase{
		{name: "missing service", data: hookBundle(hookCompose, before("nope")), codes: hookInvalid, detail: "hook service nope is not a service of the compose files"},
		{name: "hook of a long-running service", data: hookBundle(hookCompose, before("worker")), codes: hookInvalid, detail: "hook service worker has restart always"},
		{name: "restart unless-stopped", data: hookBundle(hookCompose, before("daemon")), codes: hookInvalid, detail: "daemon has restart unless-stopped"},
		{name: "deploy restart_policy any", data: hookBundle(hookCompose, before("swarmy")), codes: hookInvalid, detail: "swarmy has restart always"},
		{name: "not behind the profile", data: hookBundle(hookCompose, before("plain")), codes: hookInvalid, detail: "not behind the monky-hooks profile"},
		{name: "a service twice", data: hookBundle(hookCompose, hooks(Hooks{BeforeSwitch: []Hook{{Service: "backup"}}, AfterSwitch: []Hook{{Service: "backup"}}})),
			codes: hookInvalid, detail: "service backup is a hook twice"},
		{name: "timeout too long", data: hookBundle(hookCompose, hooks(Hooks{BeforeSwitch: []Hook{{Service: "backup", TimeoutSeconds: 7200}}})),
			codes: hookInvalid, detail: "timeout_s is 7200"},
		{name: "bad service name", data: hookBundle(hookCompose, before("-x")), codes: []codes.Code{codes.HookInvalid, codes.HookInvalid}, detail: "not a compose service name"},
		{name: "hooks at schema 1", data: hookBundle(hookCompose, func(m *Manifest) { before("backup")(m); m.Schema = 1 }), codes: malformed, detail: "hooks and restore need schema 2"},
		{name: "restore at schema 1", data: hookBundle(hookCompose, func(m *Manifest) { m.Restore = RestoreUnsafe; m.Schema = 1 }), codes: malformed, detail: "need schema 2"},
		{name: "restore unknown", data: hookBundle(hookCompose, func(m *Manifest) { m.Restore = "maybe" }), codes: malformed, detail: `restore must be "safe" or "unsafe"`},
	}
}

func TestVerifyHooksAccepted(t *testing.T) {
	data := hookBundle(hookCompose, func(m *Manifest) {
		m.Restore = RestoreUnsafe
		m.Hooks = &Hooks{BeforeSwitch: []Hook{{Service: "backup", TimeoutSeconds: 60}}, AfterSwitch: []Hook{{Service: "smoke", Repeatable: true}}}
	})(t)
	res, err := Verify(context.Background(), bytes.NewReader(data), expect())
	require.NoError(t, err)
	assert.True(t, res.Manifest.RestoreUnsafe())
	assert.NotContains(t, res.Services, "backup", "a hook is not a service up starts")
	var imgs []string
	for _, im := range res.Images {
		imgs = append(imgs, im.Service+"="+im.Ref)
	}
	assert.Contains(t, imgs, "backup=backup:1", "a hook's image is pulled before the lease")
	assert.Contains(t, imgs, "smoke=smoke:1")
	assert.Equal(t, "1m0s", res.Manifest.Hooks.BeforeSwitch[0].Timeout().String())
	assert.Equal(t, DefaultHookTimeout, res.Manifest.Hooks.AfterSwitch[0].Timeout())
}

// TestManifestHooksStrict: the hooks object is decoded as strictly as the rest.
func TestManifestHooksStrict(t *testing.T) {
	base := func(hooks string) []byte {
		return []byte(`{"schema":2,"env_id":"env-dev-01","serial":1,"compose_files":["c.yaml"],"files":["c.yaml"],"hooks":` + hooks + `}`)
	}
	for _, tt := range []struct{ hooks, detail string }{
		{`{"before":[]}`, `unknown field "hooks.before"`},
		{`{"before_switch":[{"service":"a","retries":1}]}`, `unknown field "hooks.before_switch[0].retries"`},
		{`{"before_switch":[{"timeout_s":1}]}`, `field "hooks.before_switch[0].service" is missing`},
		{`{"before_switch":{"service":"a"}}`, `must be an array`},
		{`{"before_switch":[{"service":"a","service":"b"}]}`, `appears twice`},
		{`{"before_switch":[{"service":"a","timeout_s":"1"}]}`, `timeout_s`},
	} {
		_, rs := decodeManifest(base(tt.hooks))
		require.NotEmpty(t, rs, tt.hooks)
		assert.Equal(t, codes.BundleMalformed, rs[0].Code)
		assert.Contains(t, rs[0].Detail, tt.detail, tt.hooks)
	}
	m, rs := decodeManifest(base(`{"before_switch":[{"service":"backup","timeout_s":30,"repeatable":true}],"after_switch":null}`))
	require.Empty(t, rs)
	assert.Equal(t, []Hook{{Service: "backup", TimeoutSeconds: 30, Repeatable: true}}, m.AllHooks())
}

// TestNewerSchemaNamesTheSchema: a manifest of a later schema, with fields this agent
// does not know, is refused for its schema, not for the first unknown field.
func TestNewerSchemaNamesTheSchema(t *testing.T) {
	_, rs := decodeManifest([]byte(`{"schema":3,"env_id":"env-dev-01","serial":1,"compose_files":["c.yaml"],"files":["c.yaml"],"canary":{}}`))
	require.Len(t, rs, 1)
	assert.Contains(t, rs[0].Detail, "schema is 3, this agent knows 1 to 2")
	// What an agent of schema 1 says of a schema 2 manifest: refused before the lease.
	var m Manifest
	require.NoError(t, json.Unmarshal([]byte(`{"schema":2}`), &m))
	assert.Equal(t, 2, m.Schema)
}
