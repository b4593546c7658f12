package composecheck

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// Values planted in Vars: no finding may ever carry one.
const (
	plantedVar  = "hunter2-planted-var-value"
	plantedCPUs = "hunter2-cpus-value"
)

type checkCase struct {
	name     string
	compose  []string          // testdata files, in compose_files order; the bundle path is the file name
	extra    map[string]string // more bundle files: path -> content
	unlisted []string          // extra files present in Files but missing from BundleFiles
	vars     map[string]string
	secrets  []string
	allow    []string
}

func baseVars() map[string]string {
	return map[string]string{"ENV_ID": "env-dev-01", "API_TAG": "1.2.3", "SET_VAR": plantedVar, "SET_EMPTY": ""}
}

var checkCases = []checkCase{
	{name: "good", compose: []string{"good.yaml"}, secrets: []string{"DB_PASSWORD"},
		extra: map[string]string{"config/app.env": "A=1\nB='two'\n", "config/app.toml": "x = 1\n", "config/db.pem": "pem\n"}},
	{name: "privileged-short", compose: []string{"privileged-short.yaml"}},
	{name: "privileged-long", compose: []string{"privileged-long.yaml"}, extra: map[string]string{"config/secret.txt": "s"}},
	{name: "allowlist", compose: []string{"allowlist.yaml"}, allow: []string{"traefik", "not-a-service"}},
	{name: "allowlist-empty", compose: []string{"allowlist.yaml"}},
	{name: "vars-positions", compose: []string{"vars-positions.yaml"}},
	{name: "vars-bind-source", compose: []string{"vars-bind-source.yaml"}},
	{name: "vars-bind-source-set", compose: []string{"vars-bind-source.yaml"},
		vars: map[string]string{"DATA_DIR": "./data", "OTHER_DIR": "/srv/elsewhere"}},
	{name: "vars-defaults", compose: []string{"vars-defaults.yaml"}, secrets: []string{"DB_PASSWORD"}},
	{name: "override", compose: []string{"override-base.yaml", "override-prod.yaml"}},
	{name: "override-base-only", compose: []string{"override-base.yaml"}},
	{name: "invalid-yaml", compose: []string{"invalid-yaml.yaml"}},
	{name: "invalid-schema", compose: []string{"invalid-schema.yaml"}},
	{name: "invalid-value", compose: []string{"invalid-value.yaml"}, vars: map[string]string{"CPUS": plantedCPUs}},
	{name: "invalid-port", compose: []string{"invalid-port.yaml"}},
	{name: "invalid-interpolation", compose: []string{"invalid-interpolation.yaml"}},
	{name: "include", compose: []string{"include.yaml"}, extra: map[string]string{"other.yaml": "services: {}\n"}},
	{name: "extends-file", compose: []string{"extends-file.yaml"}},
	{name: "extends-same", compose: []string{"extends-same.yaml"}, allow: []string{"base"}},
	{name: "envfiles", compose: []string{"envfiles.yaml"},
		extra:    map[string]string{"config/app.env": "A=1\n", "config/bad.env": "A='unterminated " + plantedVar + "\n", "config/labels.txt": "a=b\n"},
		unlisted: []string{"config/unlisted.env"}},
	{name: "profiles", compose: []string{"profiles.yaml"}},
	{name: "jobs", compose: []string{"jobs.yaml"}},
	{name: "missing-compose-file", compose: []string{"good.yaml", "not-in-bundle.yaml"}},
	{name: "no-compose-file"},
}

func (tc checkCase) input(t *testing.T) Input {
	t.Helper()
	in := Input{
		Files:           map[string][]byte{},
		ComposeFiles:    slices.Clone(tc.compose),
		Vars:            baseVars(),
		SecretNames:     tc.secrets,
		AllowPrivileged: tc.allow,
		ProjectName:     "monky",
	}
	for k, v := range tc.vars {
		in.Vars[k] = v
	}
	for _, f := range tc.compose {
		content, err := os.ReadFile(filepath.Join("testdata", f))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		in.Files[f] = content
		in.BundleFiles = append(in.BundleFiles, f)
	}
	for f, content := range tc.extra {
		in.Files[f] = []byte(content)
		in.BundleFiles = append(in.BundleFiles, f)
	}
	for _, f := range tc.unlisted {
		in.Files[f] = []byte("A=1\n")
	}
	slices.Sort(in.BundleFiles)
	return in
}

func TestCheckGolden(t *testing.T) {
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.input(t)
			got := Check(context.Background(), in)

			for _, f := range got.Findings {
				assert.NotContains(t, f.Detail, plantedVar)
				assert.NotContains(t, f.Detail, plantedCPUs)
				assert.NotContains(t, f.Detail, "hunter2")
				assert.NotContains(t, f.Detail, secretPlaceholder)
				assert.Contains(t, []string{CodeComposeInvalid, CodeUnresolvedVars, CodePrivileged, CodeManifestPaths}, f.Code)
			}
			assert.True(t, slices.IsSortedFunc(got.Findings, func(a, b Finding) int {
				if c := strings.Compare(a.Code, b.Code); c != 0 {
					return c
				}
				return strings.Compare(a.Detail, b.Detail)
			}))
			assert.True(t, slices.IsSorted(got.Services))
			assert.Equal(t, got, Check(context.Background(), in), "deterministic")

			gotJSON, err := json.MarshalIndent(got, "", "  ")
			require.NoError(t, err)
			gotJSON = append(gotJSON, '\n')
			golden := filepath.Join("testdata", "golden", tc.name+".json")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, gotJSON, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(gotJSON))
		})
	}
}
