package plan_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/composecheck"
	"github.com/monky/monky-deployd/internal/plan"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// release is one side of a case: its compose file, vars, secret names and other files.
type release struct {
	compose string
	vars    map[string]string
	secrets []string
	files   map[string]string
}

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// side loads r as the agent runs it: in /srv/monky/releases/<sha>.
func side(tb testing.TB, sha string, r release) (*plan.Side, error) {
	tb.Helper()
	files := map[string][]byte{"compose.yaml": []byte(r.compose)}
	digests := map[string]string{"compose.yaml": digest(r.compose)}
	for p, c := range r.files {
		files[p] = []byte(c)
		digests[p] = digest(c)
	}
	dir := "/srv/monky/releases/" + sha
	p, err := composecheck.LoadProject(context.Background(), composecheck.ProjectInput{
		Files: files, ComposeFiles: []string{"compose.yaml"}, Vars: r.vars, SecretNames: r.secrets,
		ProjectName: "monky", Dir: dir,
	})
	if err != nil {
		return nil, err
	}
	return &plan.Side{SHA: sha, Dir: dir, Project: p, Files: digests, Sources: plan.Sources(p, sha)}, nil
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// base is the compose file of baseRelease: web mounts a file of the release, worker
// reads the whole .env. deployd's plan golden test loads the same file.
var base = readFile("testdata/release/compose.yaml")

func readFile(p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		panic(err)
	}
	return string(data)
}

var baseRelease = release{compose: base, vars: map[string]string{"LOG_LEVEL": "info"}, secrets: []string{"DB_PASSWORD"},
	files: map[string]string{"config/app.toml": "listen = 1\n"}}

func with(r release, edit func(*release)) release {
	c := release{compose: r.compose, vars: maps.Clone(r.vars), secrets: slices.Clone(r.secrets), files: maps.Clone(r.files)}
	edit(&c)
	return c
}

// cases are pairs of releases; what Diff says of each is in testdata/diff.json.
var cases = []struct {
	name       string
	live, next release
}{
	{"a new release directory alone recreates the service with a bind mount", baseRelease, baseRelease},
	{"a changed mounted file is named",
		baseRelease, with(baseRelease, func(r *release) { r.files["config/app.toml"] = "listen = 2\n" })},
	{"a var's value reaches the services that use it, by name",
		baseRelease, with(baseRelease, func(r *release) { r.vars["LOG_LEVEL"] = "debug" })},
	{"a new var reaches the services with env_file .env, as added",
		baseRelease, with(baseRelease, func(r *release) { r.vars["FEATURE_X"] = "on" })},
	{
		name: "image and other settings name their keys",
		live: baseRelease,
		next: with(baseRelease, func(r *release) {
			r.compose = strings.Replace(strings.Replace(r.compose, "busybox:1.36", "busybox:1.37", 1), `["sleep", "infinity"]`, `["sleep", "600"]`, 1)
		}),
	},
	{
		name: "depends_on, pull_policy and replicas are not in the hash",
		live: with(baseRelease, func(r *release) {
			r.compose = strings.Replace(r.compose, "    env_file: [.env]\n", "    env_file: [.env]\n    deploy:\n      replicas: 1\n", 1)
		}),
		next: with(baseRelease, func(r *release) {
			r.compose = strings.Replace(r.compose, "    env_file: [.env]\n", "    env_file: [.env]\n    pull_policy: always\n    depends_on: [web]\n    deploy:\n      replicas: 2\n", 1)
		}),
	},
	{"added and removed services",
		baseRelease, with(baseRelease, func(r *release) { r.compose = strings.Replace(r.compose, "  worker:", "  jobs:", 1) })},
	{"a secret's name is the same placeholder on both sides",
		release{compose: tokenEnv, secrets: []string{"TOKEN"}}, release{compose: tokenEnv, secrets: []string{"TOKEN"}}},
	// compose hashes a config by name, and bind-mounts its file from the release.
	{"a config file of the release recreates on every release, through the label",
		release{compose: configApp, files: map[string]string{"app.conf": "1", "other": "1"}}, release{compose: configApp, files: map[string]string{"app.conf": "2", "other": "2"}}},
	{"a config file that stays recreates too: the old release is pruned",
		release{compose: configApp, files: map[string]string{"app.conf": "1", "other": "1"}}, release{compose: configApp, files: map[string]string{"app.conf": "1", "other": "2"}}},
	{"a config directory names every changed file under it",
		release{compose: configDir, files: map[string]string{"conf/a": "1", "conf/b": "1"}}, release{compose: configDir, files: map[string]string{"conf/a": "1", "conf/b": "2"}}},
	// Its value comes from the .env (a secret): no digest of it, new every release.
	{"a secret from a variable counts as new in every release",
		release{compose: secretEnv, secrets: []string{"TOKEN"}}, release{compose: secretEnv, secrets: []string{"TOKEN"}}},
	{"inline config content counts as new in every release",
		release{compose: configContent, vars: map[string]string{"LEVEL": "info"}}, release{compose: configContent, vars: map[string]string{"LEVEL": "info"}}},
	{"an external config is the same in every release",
		release{compose: configExternal}, release{compose: configExternal}},
}

const (
	configApp      = "services:\n  api:\n    image: a:1\n    configs: [app]\nconfigs:\n  app:\n    file: ./app.conf\n"
	configDir      = "services:\n  api:\n    image: a:1\n    configs: [app]\nconfigs:\n  app:\n    file: ./conf\n"
	tokenEnv       = "services:\n  api:\n    image: a:1\n    environment:\n      TOKEN: ${TOKEN}\n"
	secretEnv      = "services:\n  api:\n    image: a:1\n    secrets: [token]\nsecrets:\n  token:\n    environment: TOKEN\n"
	configExternal = "services:\n  api:\n    image: a:1\n    configs: [app]\nconfigs:\n  app:\n    external: true\n"
	configContent  = "services:\n  api:\n    image: a:1\n    configs: [app]\nconfigs:\n  app:\n    content: \"level=${LEVEL}\"\n"
)

// A live release staged before the agent wrote labels has containers without one:
// compose recreates each service with configs once, to add it.
func TestDiffLiveWithoutLabels(t *testing.T) {
	r := release{compose: configApp, files: map[string]string{"app.conf": "1"}}
	live, err := side(t, shaA, r)
	require.NoError(t, err)
	live.Sources = nil
	next, err := side(t, shaB, r)
	require.NoError(t, err)
	got, _ := plan.Diff(live, next)
	require.Len(t, got, 1)
	assert.Equal(t, plan.Recreated, got[0].Change)
	require.Len(t, got[0].Reasons, 1)
	assert.Contains(t, got[0].Reasons[0].Text, "no "+plan.SourcesLabel+" label yet")
}

// The labels file is a compose file that compose-go merges into the release's own:
// each service with configs or secrets gets the label, the others nothing.
func TestLabelsFileMergesIntoTheProject(t *testing.T) {
	const compose = "services:\n  api:\n    image: a:1\n    configs: [app]\n  plain:\n    image: b:1\nconfigs:\n  app:\n    file: ./app.conf\n"
	dir := "/srv/monky/releases/" + shaA
	in := composecheck.ProjectInput{Files: map[string][]byte{"compose.yaml": []byte(compose), "app.conf": []byte("1")},
		ComposeFiles: []string{"compose.yaml"}, ProjectName: "monky", Dir: dir}
	p, err := composecheck.LoadProject(context.Background(), in)
	require.NoError(t, err)
	sources := plan.Sources(p, shaA)
	require.Len(t, sources, 1)
	labels := plan.LabelsFile(sources)
	golden.Assert(t, "labels.yaml", labels)

	in.Files[".deployd-labels.yaml"] = labels
	in.ComposeFiles = append(in.ComposeFiles, ".deployd-labels.yaml")
	merged, err := composecheck.LoadProject(context.Background(), in)
	require.NoError(t, err)
	assert.Equal(t, sources["api"], merged.Services["api"].Labels[plan.SourcesLabel])
	assert.Equal(t, "a:1", merged.Services["api"].Image, "the rest of the service stays")
	assert.NotContains(t, merged.Services["plain"].Labels, plan.SourcesLabel)
	assert.Nil(t, plan.LabelsFile(nil), "no service with configs: no file")
}

// TestDiff: the services of each case, their changes and reasons (kinds, names and
// text), as testdata/diff.json has them. No subtests: go test -update -run of one case
// would write a diff.json of it alone.
func TestDiff(t *testing.T) {
	type result struct {
		Case     string
		Services []plan.Service
	}
	var got []result
	for _, tc := range cases {
		live, err := side(t, shaA, tc.live)
		require.NoError(t, err, tc.name)
		next, err := side(t, shaB, tc.next)
		require.NoError(t, err, tc.name)
		services, _ := plan.Diff(live, next)
		got = append(got, result{tc.name, services})
	}
	data, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	golden.Assert(t, "diff.json", append(data, '\n'))
}

func TestDiffNilSides(t *testing.T) {
	next, err := side(t, shaB, baseRelease)
	require.NoError(t, err)
	got, notes := plan.Diff(nil, next)
	assert.Equal(t, []plan.Service{{Name: "web", Change: plan.Added}, {Name: "worker", Change: plan.Added}}, got)
	assert.Empty(t, notes)
	got, _ = plan.Diff(next, nil)
	assert.Equal(t, []plan.Service{{Name: "web", Change: plan.Removed}, {Name: "worker", Change: plan.Removed}}, got)
	got, _ = plan.Diff(next, next)
	assert.Equal(t, []plan.Service{{Name: "web", Change: plan.Kept}, {Name: "worker", Change: plan.Kept}}, got)
}

func TestDiffNotes(t *testing.T) {
	live, err := side(t, shaA, release{compose: "services:\n  api:\n    image: a:1\n    networks: [back]\n    volumes: [data:/data]\nnetworks:\n  back: {}\nvolumes:\n  data: {}\n"})
	require.NoError(t, err)
	next, err := side(t, shaB, release{compose: "services:\n  api:\n    image: a:1\n    networks: [back]\n    volumes: [data:/data]\nnetworks:\n  back:\n    internal: true\nvolumes:\n  data:\n    labels: {a: b}\n"})
	require.NoError(t, err)
	_, notes := plan.Diff(live, next)
	require.Len(t, notes, 2)
	assert.Contains(t, notes[0], "network back")
	assert.Contains(t, notes[0], "(api)")
	assert.Contains(t, notes[1], "volume data")
}

// FuzzDiff loads two compose files (seeded from the table) and checks that Diff
// never panics, lists every service once and never returns the value of a var.
func FuzzDiff(f *testing.F) {
	for _, tc := range cases {
		f.Add(tc.live.compose, tc.next.compose)
	}
	const value = "v4lue-n0t-to-print"
	f.Fuzz(func(t *testing.T, a, b string) {
		vars := map[string]string{"LOG_LEVEL": value, "FEATURE_X": value}
		files := map[string]string{"config/app.toml": "x"}
		live, err := side(t, shaA, release{compose: a, vars: vars, secrets: []string{"DB_PASSWORD"}, files: files})
		if err != nil {
			return
		}
		next, err := side(t, shaB, release{compose: b, vars: map[string]string{"LOG_LEVEL": value + "2"}, secrets: []string{"DB_PASSWORD"}, files: files})
		if err != nil {
			return
		}
		services, notes := plan.Diff(live, next)
		seen := map[string]bool{}
		for _, s := range services {
			if seen[s.Name] {
				t.Fatalf("service %s twice", s.Name)
			}
			seen[s.Name] = true
		}
		// The plan's text and JSON are made of these (deployd's TestPlanNoValues).
		data, _ := json.Marshal(struct {
			Services []plan.Service
			Notes    []string
		}{services, notes})
		if out := string(data); strings.Contains(out, value) || strings.Contains(out, composecheck.SecretPlaceholder) {
			t.Fatalf("a value is printed:\n%s", out)
		}
	})
}
