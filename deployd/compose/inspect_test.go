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
)

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
