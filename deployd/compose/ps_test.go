package compose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			out = append(out, essential{c.Name, c.Service, c.State, c.Health, c.Status, c.ExitCode, c.Publishers})
		}
		return out
	}
	a, l := parsePSFile(t, "ps-compose-2.20-array.json"), parsePSFile(t, "ps-compose-2.21-lines.json")
	for i := range a {
		if len(a[i].Publishers) == 0 {
			a[i].Publishers = nil
		}
		if len(l[i].Publishers) == 0 {
			l[i].Publishers = nil
		}
	}
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
