package composecheck

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

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
	{name: "vars-and-privileged", compose: []string{"vars-and-privileged.yaml"}},
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
				assert.Contains(t, []codes.Code{codes.ComposeInvalid, codes.UnresolvedVars, codes.Privileged, codes.ManifestPaths}, f.Code)
			}
			assert.True(t, slices.IsSortedFunc(got.Findings, func(a, b Finding) int {
				if c := strings.Compare(string(a.Code), string(b.Code)); c != 0 {
					return c
				}
				return strings.Compare(a.Detail, b.Detail)
			}))
			assert.True(t, slices.IsSorted(got.Services))
			assert.Equal(t, got, Check(context.Background(), in), "deterministic")

			gotJSON, err := json.MarshalIndent(got, "", "  ")
			require.NoError(t, err)
			gotJSON = append(gotJSON, '\n')
			golden.Assert(t, "golden/"+tc.name+".json", gotJSON)
		})
	}
}

func TestCheckIgnoresProcessEnvironment(t *testing.T) {
	// compose-go's defaults read os.Environ; the check must not.
	t.Setenv("DATA_DIR", "/etc")
	t.Setenv("OTHER_DIR", "./inside")
	in := checkCase{compose: []string{"vars-bind-source.yaml"}}.input(t)
	got := Check(context.Background(), in)
	require.Len(t, got.Findings, 2)
	for _, f := range got.Findings {
		assert.Equal(t, codes.UnresolvedVars, f.Code)
	}
	assert.False(t, got.OK())
}

func TestCheckUnsetBindSourceNeverInsideRelease(t *testing.T) {
	for _, yaml := range []string{
		"services:\n  a:\n    image: x\n    volumes:\n      - type: bind\n        source: ${UNSET}\n        target: /data\n",
		"services:\n  a:\n    image: x\n    volumes:\n      - ${UNSET}:/data\n",
		"services:\n  a:\n    image: x\n    volumes:\n      - ${UNSET}/sub:/data\n",
		"services:\n  a:\n    image: x\n    volumes:\n      - ${UNSET:?}:/data\n",
	} {
		t.Run(yaml, func(t *testing.T) {
			got := checkOne(yaml, nil)
			require.False(t, got.OK())
			assert.Contains(t, got.Findings, Finding{Code: codes.UnresolvedVars,
				Detail: "compose.yaml: variable UNSET is not provided by vars, secrets or a default (at services.a.volumes[0]" +
					map[bool]string{true: ".source)", false: ")"}[strings.Contains(yaml, "source:")]})
		})
	}
}

func TestCheckSecretsAreSetAndNonEmpty(t *testing.T) {
	yaml := "services:\n  a:\n    image: x\n    environment:\n      P: ${DB_PASSWORD:?}\n      Q: ${DB_USER:?required}\n"
	in := composeInput(yaml, nil)
	in.Vars, in.SecretNames = map[string]string{"DB_USER": ""}, []string{"DB_PASSWORD"}
	got := Check(context.Background(), in)
	assert.Equal(t, []Finding{{Code: codes.UnresolvedVars,
		Detail: "compose.yaml: variable DB_USER is empty but ${DB_USER:?} requires a value (at services.a.environment.Q)"}}, got.Findings)
	assert.Equal(t, []string{"a"}, got.Services)
}

// TestCheckRefusedBeforeTheLoad: a cancelled context, or a project name compose would
// change, is one finding, and nothing is loaded.
func TestCheckRefusedBeforeTheLoad(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	in := checkCase{compose: []string{"good.yaml"}}.input(t)
	got := Check(cancelled, in)
	assert.Equal(t, []Finding{{Code: codes.ComposeInvalid, Detail: "compose check did not run: context canceled"}}, got.Findings)
	assert.False(t, got.OK())

	in.ProjectName = "Monky Prod"
	got = Check(context.Background(), in)
	assert.Equal(t, []Finding{{Code: codes.ComposeInvalid,
		Detail: `project name "Monky Prod" is not a valid compose project name (lowercase letters, digits, - and _)`}}, got.Findings)
	assert.Equal(t, []string{}, got.Services)
}

func TestInRelease(t *testing.T) {
	tests := []struct {
		path   string
		rel    string
		inside bool
	}{
		{ReleaseDir, ".", true},
		{ReleaseDir + "/config/app.toml", "config/app.toml", true},
		{ReleaseDir + "/config/../x", "x", true},
		{ReleaseDir + "/../other", "", false},
		{ReleaseDir + "x/y", "", false},
		{ReleaseDir + "/~/.ssh", "", false},
		{"/etc", "", false},
		{"relative/path", "", false},
		{"", "", false},
		{`C:\data`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			rel, inside := inDir(ReleaseDir, tc.path)
			assert.Equal(t, tc.inside, inside)
			assert.Equal(t, tc.rel, rel)
		})
	}
}

func TestUnconfined(t *testing.T) {
	// Every spelling of a row's option is refused as want; want "": allowed.
	tests := []struct {
		want string
		opts []string
	}{
		{"seccomp=unconfined", []string{"seccomp=unconfined", "seccomp:unconfined", "Seccomp = Unconfined"}},
		{"apparmor=unconfined", []string{"apparmor=unconfined", "apparmor:unconfined"}},
		{"systempaths=unconfined", []string{"systempaths=unconfined"}},
		{"label=disable", []string{"label=disable", "label:disable"}},
		// A profile file is the bundle's own: {"defaultAction":"SCMP_ACT_ALLOW"} is
		// unconfined by another name.
		{"seccomp loads a custom profile", []string{"seccomp=./profile.json"}},
		{"label spc_t is unconfined", []string{"label=type:spc_t"}},
		{"", []string{"no-new-privileges:true", "label=type:svirt_apache_t", "seccomp=builtin"}},
	}
	for _, tc := range tests {
		for _, opt := range tc.opts {
			t.Run(opt, func(t *testing.T) {
				got, bad := unconfined(opt)
				assert.Equal(t, tc.want != "", bad)
				assert.Equal(t, tc.want, got)
			})
		}
	}
}

func TestDescribeLoadErrorNeverQuotesTheMessage(t *testing.T) {
	files := []string{"compose.yaml"}
	tests := []struct {
		err  string
		want string
	}{
		{"failed to parse compose.yaml: yaml: line 7: did not find expected key", "compose.yaml: not valid YAML (line 7)"},
		{"validating compose.yaml: services.api.image must be a string", "compose.yaml: services.api.image does not match the compose specification"},
		{"error while interpolating services.api.cpus: failed to cast to expected type: strconv.ParseFloat: parsing \"hunter2\": invalid syntax", "compose.yaml: services.api.cpus has an invalid value after interpolation"},
		{"invalid interpolation format for services.api.image.\nYou may need to escape any $ with another $.\nhunter2${", "compose.yaml: services.api.image has an invalid value after interpolation"},
		{"Invalid containerPort: hunter2", "compose.yaml: rejected by compose: Invalid containerPort"},
		{"invalid project name \"hunter2\": must consist only of lowercase", "compose.yaml: rejected by compose (the message is withheld because it may quote a value)"},
		{"hunter2", "compose.yaml: rejected by compose (the message is withheld because it may quote a value)"},
	}
	assert.Equal(t, "compose.yaml: compose-go failed on the files (it panicked)",
		describeLoadError(context.Background(), errLoaderPanic, files))
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			got := describeLoadError(context.Background(), errors.New(tc.err), files)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "hunter2")
		})
	}
}
