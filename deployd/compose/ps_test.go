package compose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// parsePSFile parses the ps output in testdata/name.
func parsePSFile(t *testing.T, name string) []Container {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	cs, err := ParsePS(data)
	require.NoError(t, err)
	return cs
}

// TestParsePSGolden parses the captured shapes of record and compares with goldens.
func TestParsePSGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		count int
	}{
		{"ps-compose-2.20-array.json", 4},
		{"ps-compose-2.21-lines.json", 4},
		{"ps-compose-2.21-failing.json", 3},
		{"ps-empty-array.json", 0},
		{"ps-empty-lines.txt", 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cs := parsePSFile(t, tc.file)
			require.Len(t, cs, tc.count)
			got, err := json.MarshalIndent(cs, "", "  ")
			require.NoError(t, err)
			golden.AssertJSON(t, strings.TrimSuffix(tc.file, filepath.Ext(tc.file))+".golden", append(got, '\n'))
		})
	}
}

// TestParsePSShapesAgree: the same project printed by compose 2.20 and 2.21 gives the
// same services, states, health and exit codes.
func TestParsePSShapesAgree(t *testing.T) {
	type essential struct {
		Name, Service, State, Health, Status string
		ExitCode                             int
		Publishers                           []Publisher
	}
	strip := func(cs []Container) (out []essential) {
		for _, c := range cs {
			if len(c.Publishers) == 0 {
				c.Publishers = nil // no publishers, whichever way the shape says it
			}
			out = append(out, essential{c.Name, c.Service, c.State, c.Health, c.Status, c.ExitCode, c.Publishers})
		}
		return out
	}
	a, l := parsePSFile(t, "ps-compose-2.20-array.json"), parsePSFile(t, "ps-compose-2.21-lines.json")
	assert.Equal(t, strip(a), strip(l))
	assert.Equal(t, "web", l[0].Labels[ServiceLabel])
	assert.Equal(t, "/srv/monky/current", l[0].Labels["com.docker.compose.project.working_dir"])
	assert.Equal(t, "/docker-entrypoint.…", l[0].Command, "2.21 quotes the command; it is unquoted")
	assert.Equal(t, "/docker-entrypoint.sh nginx -g 'daemon off;'", a[0].Command)
}

var parsePSCases = []struct {
	name    string
	in      string
	want    []Container
	wantErr string
}{
	{name: "empty", in: ""},
	{name: "blank lines", in: "\n \n"},
	{name: "empty array", in: "[]"},
	{name: "null", in: "null\n"},
	{name: "one line", in: `{"ID":"a","Name":"p-web-1","Service":"web","State":"running","Health":"healthy","Status":"Up 1 second (healthy)"}`,
		want: []Container{{ID: "a", Name: "p-web-1", Service: "web", State: "running", Health: "healthy", Status: "Up 1 second (healthy)"}}},
	{name: "two lines without trailing newline", in: "{\"ID\":\"a\",\"Service\":\"a\"}\n{\"ID\":\"b\",\"Service\":\"b\"}",
		want: []Container{{ID: "a", Service: "a"}, {ID: "b", Service: "b"}}},
	{name: "CRLF lines", in: "{\"ID\":\"a\"}\r\n{\"ID\":\"b\"}\r\n", want: []Container{{ID: "a"}, {ID: "b"}}},
	{name: "service from label string", in: `{"ID":"a","Labels":"com.docker.compose.service=db,x=1=2"}`,
		want: []Container{{ID: "a", Service: "db", Labels: map[string]string{ServiceLabel: "db", "x": "1=2"}}}},
	{name: "service from label map", in: `[{"ID":"a","Labels":{"com.docker.compose.service":"db"}}]`,
		want: []Container{{ID: "a", Service: "db", Labels: map[string]string{ServiceLabel: "db"}}}},
	{name: "name from Names list", in: `[{"ID":"a","Names":["/p-web-1"]}]`, want: []Container{{ID: "a", Name: "p-web-1"}}},
	{name: "name from Names string", in: `{"ID":"a","Names":"p-web-1,alias"}`, want: []Container{{ID: "a", Name: "p-web-1"}}},
	{name: "exit code from status", in: `{"ID":"a","State":"exited","Status":"Exited (137) 3 seconds ago"}`,
		want: []Container{{ID: "a", State: "exited", Status: "Exited (137) 3 seconds ago", ExitCode: 137}}},
	{name: "state case folded", in: `{"ID":"a","State":"Running","Health":"Healthy"}`,
		want: []Container{{ID: "a", State: "running", Health: "healthy"}}},
	{name: "garbage", in: "Error response from daemon", wantErr: "object 1"},
	{name: "truncated array", in: `[{"ID":"a"`, wantErr: "not a JSON array"},
	{name: "truncated line", in: "{\"ID\":\"a\"}\n{\"ID\":", wantErr: "object 2"},
	{name: "line not an object", in: "{\"ID\":\"a\"}\n[1]", wantErr: "object 2: not a JSON object"},
	{name: "array of strings", in: `["a"]`, wantErr: "not a JSON array"},
	{name: "wrong type", in: `{"ID":"a","ExitCode":"one"}`, wantErr: `field "ExitCode" is a JSON string, want int`},
	{name: "bad labels", in: `{"ID":"a","Labels":42}`, wantErr: "field Labels"},
}

func TestParsePS(t *testing.T) {
	for _, tc := range parsePSCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePS([]byte(tc.in))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestParsePSErrorsHideContent: an error never quotes what ps printed.
func TestParsePSErrorsHideContent(t *testing.T) {
	for _, in := range []string{`{"ID":"s3cr3t-value"`, `{"ID":"a","ExitCode":"s3cr3t-value"}`, `s3cr3t-value`, `["s3cr3t-value"]`} {
		_, err := ParsePS([]byte(in))
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "s3cr3t")
	}
}

func FuzzParsePS(f *testing.F) {
	for _, tc := range parsePSCases {
		f.Add([]byte(tc.in))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "ps-*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParsePS(data)
		if err != nil {
			if cs != nil {
				t.Fatalf("error with containers: %v", err)
			}
			return
		}
		// Round trip: what was read, printed in the array shape, reads back the same.
		for _, c := range cs {
			if strings.HasPrefix(c.Command, `"`) {
				return // a command that itself looks quoted is unquoted once more
			}
		}
		b, err := json.Marshal(cs)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := ParsePS(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if len(cs) == 0 {
			cs = nil
		}
		assert.Equal(t, cs, again)
	})
}

// TestParseInspectEngine reads what a real engine (dockerd 20.10, compose v2.40)
// printed for an unhealthy service, a one-shot that exited 3 and a plain service.
func TestParseInspectEngine(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "inspect-engine-20.10.json"))
	require.NoError(t, err)
	got, err := ParseInspect(data)
	require.NoError(t, err)
	byService := map[string]Inspected{}
	for _, in := range got {
		byService[in.Service] = in
	}
	require.Len(t, byService, 3)
	web := byService["web"]
	assert.Equal(t, "monky-insp-probe-web-1", web.Name)
	assert.Equal(t, "running", web.State)
	assert.Equal(t, "unhealthy", web.Health)
	assert.Positive(t, web.FailingStreak)
	require.NotEmpty(t, web.HealthLog)
	last := web.HealthLog[len(web.HealthLog)-1]
	assert.Equal(t, 1, last.ExitCode)
	assert.Contains(t, last.Output, "connection refused (HEALTHY=0)")
	assert.False(t, last.End.IsZero())
	job := byService["job"]
	assert.Equal(t, Inspected{ID: job.ID, Name: "monky-insp-probe-job-1", Service: "job", State: "exited", ExitCode: 3}, job)
	plain := byService["plain"]
	assert.Equal(t, "running", plain.State)
	assert.Empty(t, plain.Health, "no healthcheck, no health")
	assert.Len(t, plain.ID, 64)
}

func TestParseInspectRefusesWhatIsNotAContainerList(t *testing.T) {
	for name, in := range map[string]string{
		"object":      `{"Id":"abc"}`,
		"text":        `Error: No such container: x`,
		"no id":       `[{"Name":"/x"}]`,
		"truncated":   `[{"Id":"abc","State":{"Status":"run`,
		"wrong kinds": `[{"Id":"abc","State":{"ExitCode":"1"}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseInspect([]byte(in))
			assert.Error(t, err)
		})
	}
	got, err := ParseInspect([]byte(" \n"))
	require.NoError(t, err)
	assert.Empty(t, got, "no output: no containers")
}

func FuzzParseInspect(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "inspect-engine-20.10.json"))
	require.NoError(f, err)
	f.Add(data)
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"Id":"a","State":{"Health":{"Log":[{"ExitCode":-1,"Output":"x"}]}}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseInspect(b)
		if err != nil {
			return
		}
		for _, in := range got {
			if in.ID == "" {
				t.Fatalf("a container without an ID was accepted: %+v", in)
			}
		}
		// What parses is what json says: the same input decodes as a JSON array.
		var raw []json.RawMessage
		if len(strings.TrimSpace(string(b))) > 0 && json.Unmarshal(b, &raw) != nil {
			t.Fatalf("ParseInspect accepted what is not a JSON array: %q", b)
		}
	})
}

// TestHealthEvidence: per failing service, its state, its last healthchecks with exit
// codes and output, then the logs; a one-shot's exit code.
func TestHealthEvidence(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &fakedocker.Script{Services: map[string]fakedocker.Service{
		"web": {States: []fakedocker.State{{Health: "unhealthy", HealthOutput: "GET /healthz: 503 database unavailable"}},
			Logs: "web booting\nweb: cannot reach the database\n"},
		"worker": {States: []fakedocker.State{{State: "exited", ExitCode: 2, RestartCount: 4}}, Logs: "worker: bad flag\n"},
	}})
	ctx := t.Context()
	_, err := f.client.Up(ctx)
	require.NoError(t, err)
	got := f.client.HealthEvidence(ctx, []string{"web", "worker"})
	t.Log(got)
	want := []string{
		"--- health of web (container monky-web-1): running, health unhealthy ---",
		"exit code 1: GET /healthz: 503 database unavailable",
		"--- health of worker (container monky-worker-1): exited, exit code 2, restarted 4 times ---",
		"--- logs of web, worker ---",
		"web: cannot reach the database",
		"worker: bad flag",
	}
	pos := -1
	for _, w := range want {
		i := strings.Index(got, w)
		require.GreaterOrEqual(t, i, 0, "evidence lacks %q", w)
		assert.Greater(t, i, pos, "%q is out of order", w)
		pos = i
	}
	assert.Equal(t, evidenceChecks, strings.Count(got, "healthcheck at "), "the last %d healthchecks", evidenceChecks)
	assert.Empty(t, f.client.HealthEvidence(ctx, nil))
}

// TestHealthEvidenceSaysWhatItCannotRead: a failing inspect is said in the text, and
// the logs still follow.
func TestHealthEvidenceSaysWhatItCannotRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &fakedocker.Script{
		Commands: map[string]fakedocker.Command{"inspect": {Stderr: "Cannot connect to the Docker daemon\n", Exit: 1}},
		Services: map[string]fakedocker.Service{"web": {Logs: "web log line\n"}},
	})
	ctx := t.Context()
	_, err := f.client.Up(ctx)
	require.NoError(t, err)
	got := f.client.HealthEvidence(ctx, []string{"web"})
	assert.Contains(t, got, "--- health checks: inspecting the containers failed:")
	assert.Contains(t, got, "Cannot connect to the Docker daemon")
	assert.Contains(t, got, "web log line")
}

func TestInspectRefusesAFlagAsAContainer(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.client.Inspect(t.Context(), []string{"--format={{.}}"})
	require.ErrorIs(t, err, ErrCommandFailed)
	assert.Empty(t, f.calls(), "docker never ran")
	got, err := f.client.Inspect(t.Context(), nil)
	require.NoError(t, err)
	assert.Nil(t, got)
}
