package metrics_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/metrics"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

const liveSHA = "3f1c9a0b2d4e6f8071a3b5c7d9e1f20314253647586970a1b2c3d4e5f6a7b8c9"

func sample() metrics.Snapshot {
	return metrics.Snapshot{
		EnvID:        "env-dev-01",
		Version:      "0.1.0",
		LastRun:      time.Date(2026, 11, 30, 9, 30, 5, 250e6, time.UTC),
		LastCheckin:  time.Date(2026, 11, 30, 9, 30, 1, 0, time.UTC),
		LastResult:   "failed",
		LastCode:     "UNHEALTHY",
		TickDuration: 93*time.Second + 500*time.Millisecond,
		LiveSHA:      liveSHA,
		LiveSerial:   17,
		TokenTTL:     36 * time.Hour,
		ExitCode:     1,
		Verdict:      "critical",
		VerdictExit:  2,
		Condition: &metrics.Condition{Code: "UNHEALTHY", Exit: 1, Since: time.Date(2026, 11, 30, 9, 30, 5, 250e6, time.UTC), Runs: 1,
			NextAttempt: time.Time{}},
	}
}

// family is one metric family as Prometheus' parser read it.
type family struct {
	typ     string
	help    string
	samples []point
}

type point struct {
	value  float64
	labels map[string]string
}

// parse reads the text format back with Prometheus' own parser. (The parser's proto
// types are only used through their getters, so the test needs no import of
// prometheus/client_model of its own.)
func parse(t *testing.T, data []byte) map[string]family {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := p.TextToMetricFamilies(bytes.NewReader(data))
	require.NoError(t, err)
	families := map[string]family{}
	for name, mf := range parsed {
		f := family{typ: mf.GetType().String(), help: mf.GetHelp()}
		for _, m := range mf.GetMetric() {
			s := point{value: m.GetGauge().GetValue(), labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			f.samples = append(f.samples, s)
		}
		families[name] = f
	}
	return families
}

// sampleOf returns the one sample of the gauge family name, with its labels.
func sampleOf(t *testing.T, families map[string]family, name string) (float64, map[string]string) {
	t.Helper()
	f, ok := families[name]
	require.True(t, ok, "metric %s missing", name)
	require.Equal(t, "GAUGE", f.typ, name)
	require.NotEmpty(t, f.help, name)
	require.Len(t, f.samples, 1, name)
	return f.samples[0].value, f.samples[0].labels
}

// TestFormat: every snapshot formats to a file Prometheus' parser reads, each family a
// gauge named monky_deployd_* with its help and at least one sample (so the samples
// name every family). The samples of every case are in testdata/samples.txt; the whole
// file of the one with live state, HELP and TYPE lines too, in testdata/live.prom.
func TestFormat(t *testing.T) {
	with := func(edit func(*metrics.Snapshot)) metrics.Snapshot {
		s := sample()
		edit(&s)
		return s
	}
	tests := []struct {
		name string
		snap metrics.Snapshot
	}{
		{"failed tick", sample()},
		{"fresh box: zero snapshot", metrics.Snapshot{}},
		{"env mismatch latch", metrics.Snapshot{EnvID: "env-prod-03", Version: "0.1.0", LastResult: "failed", LastCode: "AGENT_ENV_MISMATCH", EnvMismatchLatched: true, ExitCode: 78}},
		{"failed apply, restored and healthy", metrics.Snapshot{EnvID: "env-dev-01", LastResult: "failed", LastCode: "UNHEALTHY", LastRestore: "restored-healthy", ExitCode: 1}},
		{"failed apply, the restored release unhealthy: degraded", metrics.Snapshot{EnvID: "env-dev-01", LastResult: "failed", LastCode: "UNHEALTHY", LastRestore: "restored-unhealthy", Degraded: true, ExitCode: 1}},
		{"failed apply, restore failed: degraded", metrics.Snapshot{LastRestore: "restore-failed", Degraded: true}},
		{"a temporary condition that lasts, waiting for tenancy's Retry-After", metrics.Snapshot{EnvID: "env-dev-01", ExitCode: 75, Verdict: "critical", VerdictExit: 2, Condition: &metrics.Condition{
			Code: "RATE_LIMITED", Exit: 75, Since: time.Unix(1796027400, 0), Runs: 61, NextAttempt: time.Unix(1796031600, 0)}}},
		{"no condition: the series are there, at zero", metrics.Snapshot{EnvID: "env-dev-01", Verdict: "ok"}},
		{"an apply deferred by a hold, tenancy not reached for an hour", metrics.Snapshot{EnvID: "env-dev-01",
			Deferred: &metrics.Deferral{Why: "hold", Until: time.Unix(1796034600, 0)}, TenancyUnreached: time.Unix(1796027400, 0)}},
		{"nothing deferred: the series are there, at zero", metrics.Snapshot{EnvID: "env-dev-01"}},
		{"applied, temporary failure on a later tick", metrics.Snapshot{EnvID: "env-dev-01", LastResult: "applied", ExitCode: 75, LiveSerial: 4}},
		{"images removed", with(func(s *metrics.Snapshot) { s.ImagesRemoved, s.ImagesReclaimedBytes = 2, 123456789 })},
		{"docker could not be asked", with(func(s *metrics.Snapshot) { s.Live = &metrics.Live{Known: false, ObservedAt: time.Unix(1796031001, 0)} })},
		{"one service unhealthy and restarting", liveSample()},
		{"healthy", with(func(s *metrics.Snapshot) {
			s.Live = &metrics.Live{Known: true, Healthy: true, Services: []metrics.Service{{Name: "db", Healthy: true, Restarts: 1}}}
		})},
		// A service name from docker that cannot be a label value is left out; the
		// file is still written, other names are escaped, restarts never negative.
		{"unshowable services", with(func(s *metrics.Snapshot) {
			s.Live = &metrics.Live{Known: true, Services: []metrics.Service{
				{Name: ""}, {Name: strings.Repeat("x", 129)}, {Name: "bad\xff"},
				{Name: "_worker", Healthy: true}, {Name: `we"b`, Restarts: -3},
			}}
		})},
	}
	// No subtests: go test -update -run of one case would write a samples.txt of it alone.
	var samples strings.Builder
	for _, tt := range tests {
		data, err := metrics.Format(tt.snap)
		require.NoError(t, err, tt.name)
		for name, f := range parse(t, data) {
			assert.True(t, strings.HasPrefix(name, "monky_deployd_"), "%s: %s", tt.name, name)
			assert.Equal(t, "GAUGE", f.typ, "%s: %s", tt.name, name)
			assert.NotEmpty(t, f.help, "%s: %s", tt.name, name)
			assert.NotEmpty(t, f.samples, "%s: %s", tt.name, name)
		}
		samples.WriteString("# " + tt.name + "\n")
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if !strings.HasPrefix(line, "#") {
				samples.WriteString(line)
			}
		}
	}
	golden.Assert(t, "samples.txt", []byte(samples.String()))
	data, err := metrics.Format(liveSample())
	require.NoError(t, err)
	golden.Assert(t, "live.prom", data)
}

func liveSample() metrics.Snapshot {
	s := sample()
	s.Live = &metrics.Live{
		Known: true, Healthy: false, ObservedAt: time.Date(2026, 11, 30, 9, 30, 1, 500e6, time.UTC),
		Services: []metrics.Service{{Name: "api", Healthy: false, Restarts: 7}, {Name: "web", Healthy: true}},
	}
	return s
}

func TestFormatRefusesWithoutEchoingTheValue(t *testing.T) {
	// A value that looks like a token: it must never appear in the error text.
	const planted = "s.PLANTEDsecretTOKEN0123456789"
	tests := []struct {
		name  string
		mut   func(*metrics.Snapshot)
		field string
	}{
		{"env id", func(s *metrics.Snapshot) { s.EnvID = planted }, "EnvID"},
		{"env id bad tier digits", func(s *metrics.Snapshot) { s.EnvID = "env-dev-1" }, "EnvID"},
		{"version", func(s *metrics.Snapshot) { s.Version = "0.1.0 " + planted }, "Version"},
		{"version with quote", func(s *metrics.Snapshot) { s.Version = `0.1"` }, "Version"},
		{"result outside the vocabulary", func(s *metrics.Snapshot) { s.LastResult = "up" }, "LastResult"},
		{"result secret", func(s *metrics.Snapshot) { s.LastResult = planted }, "LastResult"},
		{"code", func(s *metrics.Snapshot) { s.LastCode = planted }, "LastCode"},
		{"code lowercase", func(s *metrics.Snapshot) { s.LastCode = "unhealthy" }, "LastCode"},
		{"sha", func(s *metrics.Snapshot) { s.LiveSHA = planted }, "LiveSHA"},
		{"sha upper case", func(s *metrics.Snapshot) { s.LiveSHA = strings.ToUpper(liveSHA) }, "LiveSHA"},
		{"serial", func(s *metrics.Snapshot) { s.LiveSerial = -1 }, "LiveSerial"},
		{"tick duration", func(s *metrics.Snapshot) { s.TickDuration = -time.Second }, "TickDuration"},
		{"token ttl", func(s *metrics.Snapshot) { s.TokenTTL = -time.Second }, "TokenTTL"},
		{"restore with a label-breaking character", func(s *metrics.Snapshot) { s.LastRestore = `restored"}` }, "LastRestore"},
		{"restore secret", func(s *metrics.Snapshot) { s.LastRestore = planted }, "LastRestore"},
		{"exit code high", func(s *metrics.Snapshot) { s.ExitCode = 256 }, "ExitCode"},
		{"exit code negative", func(s *metrics.Snapshot) { s.ExitCode = -1 }, "ExitCode"},
		{"images removed negative", func(s *metrics.Snapshot) { s.ImagesRemoved = -1 }, "ImagesRemoved"},
		{"deferred why", func(s *metrics.Snapshot) { s.Deferred = &metrics.Deferral{Why: planted} }, "Deferred.Why"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sample()
			tt.mut(&s)
			data, err := metrics.Format(s)
			require.Error(t, err)
			assert.Nil(t, data)
			require.ErrorIs(t, err, metrics.ErrInvalid)
			var fe *metrics.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)
			assert.NotContains(t, err.Error(), planted)
			assert.Contains(t, err.Error(), tt.field)

			// Write refuses the same way and leaves no file behind.
			path := filepath.Join(t.TempDir(), "monky-deployd.prom")
			require.ErrorIs(t, metrics.Write(path, s), metrics.ErrInvalid)
			assert.NoFileExists(t, path)
		})
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "monky-deployd.prom")
	// An old file is replaced whole.
	require.NoError(t, os.WriteFile(path, []byte("stale\n"), 0o600))

	require.NoError(t, metrics.Write(path, sample()))

	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, metrics.FileMode, info.Mode().Perm())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := metrics.Format(sample())
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Only the .prom file is left: no temp file the collector could pick up.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "monky-deployd.prom", entries[0].Name())

	// A second write with new values replaces the first.
	s := sample()
	s.LiveSerial = 18
	require.NoError(t, metrics.Write(path, s))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	v, _ := sampleOf(t, parse(t, got), "monky_deployd_live_serial")
	assert.InDelta(t, 18.0, v, 0)

	err = metrics.Write(filepath.Join(dir, "no-such-dir", "monky-deployd.prom"), sample())
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "no-such-dir")
}

// FuzzFormat checks that whatever a caller puts into the string fields, Format either
// refuses with a FieldError that does not echo the value, or writes a file that
// Prometheus' parser reads back with the same label values.
func FuzzFormat(f *testing.F) {
	f.Add("env-dev-01", "0.1.0", "applied", "", liveSHA, int64(3), 0)
	f.Add("env-prod-03", "1.2.3-rc.1+g1a2b", "failed", "HEALTH_TIMEOUT", "", int64(0), 1)
	f.Add("", "", "", "", "", int64(0), 75)
	f.Add("env-dev-01\n", "0.1\"", "up", "x\\y", "zz", int64(-1), 300)
	f.Fuzz(func(t *testing.T, envID, version, result, code, sha string, serial int64, exit int) {
		s := metrics.Snapshot{EnvID: envID, Version: version, LastResult: result, LastCode: codes.Code(code), LiveSHA: sha, LiveSerial: serial, ExitCode: exit}
		data, err := metrics.Format(s)
		if err != nil {
			var fe *metrics.FieldError
			require.ErrorAs(t, err, &fe)
			for _, v := range []string{envID, version, result, code, sha} {
				if len(v) >= 8 {
					assert.NotContains(t, err.Error(), v)
				}
			}
			return
		}
		families := parse(t, data)
		_, info := sampleOf(t, families, "monky_deployd_info")
		assert.Equal(t, map[string]string{"env_id": envID, "version": version, "live_sha": sha}, info)
		_, last := sampleOf(t, families, "monky_deployd_last_result")
		assert.Equal(t, map[string]string{"result": result, "code": code}, last)
	})
}
