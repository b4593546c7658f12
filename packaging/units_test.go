package packaging_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
)

// The box runs one binary, /usr/bin/monky-deployd, from one of two units: the timer's
// one-shot monky-deployd.service (transport proxy or system) or the long-running
// monky-deployd-loop.service (transport sdk: one process, one OpenZiti context). These
// tests keep the two units alike where they must be and different where they must be.
// check.sh checks the built .deb (one file in /usr/bin, the packaged binary taking each
// unit's command line) and systemd-analyze verify; test/systemd runs both units.

const (
	agentBin     = "/usr/bin/monky-deployd"
	serviceUnit  = "packaging/systemd/monky-deployd.service"
	loopUnit     = "packaging/systemd/monky-deployd-loop.service"
	timerUnit    = "packaging/systemd/monky-deployd.timer"
	holdPathUnit = "packaging/systemd/monky-deployd-hold.path"
)

// unit is a unit file: section -> key -> values in order (a key may repeat).
type unit map[string]map[string][]string

func readUnit(t *testing.T, rel string) unit {
	t.Helper()
	return parseUnit(t, rel, readRepoFile(t, rel))
}

func parseUnit(t *testing.T, rel, text string) unit {
	t.Helper()
	u := unit{}
	section := ""
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: not a setting: %q", rel, line)
			require.NotEmpty(t, section, "%s: a setting before any section", rel)
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// one returns the single value of key in section.
func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u[section][key]
	require.Len(t, v, 1, "[%s] %s=", section, key)
	return v[0]
}

func TestParseUnit(t *testing.T) {
	u := parseUnit(t, "x.service", "# c\n[Unit]\nA=1\n\n[Service]\nB=2\nB=3\n  # indented comment\nC=\n")
	assert.Equal(t, unit{"Unit": {"A": {"1"}}, "Service": {"B": {"2", "3"}, "C": {""}}}, u)
}

// TestUnitsRunTheOneBinary checks both ExecStart= lines: the one binary, `run`, the
// config and the metrics file, and --loop for the loop service only; then the
// lifecycle of each service.
func TestUnitsRunTheOneBinary(t *testing.T) {
	const tail = " --config /etc/monky-deployd/config.yaml --metrics-file /var/lib/prometheus/node-exporter/monky-deployd.prom"
	assert.Equal(t, agentBin+" run"+tail, readUnit(t, serviceUnit).one(t, "Service", "ExecStart"))
	assert.Equal(t, agentBin+" run --loop"+tail, readUnit(t, loopUnit).one(t, "Service", "ExecStart"))
	assert.Equal(t, "monky-deployd.service", readUnit(t, timerUnit).one(t, "Timer", "Unit"))

	// what systemd does with the loop's exits: a failure at its start or a crash is
	// restarted after a pause, 78 (AGENT_ENV_MISMATCH, latched) is not, and 75 is no
	// success (the loop backs off on 75 itself and never exits with it)
	u := readUnit(t, loopUnit)
	assert.Contains(t, []string{"exec", "simple"}, u.one(t, "Service", "Type"))
	assert.Equal(t, "on-failure", u.one(t, "Service", "Restart"))
	assert.Equal(t, "78", u.one(t, "Service", "RestartPreventExitStatus"))
	assert.NotEmpty(t, u.one(t, "Service", "RestartSec"))
	assert.NotContains(t, u["Service"], "SuccessExitStatus", "the loop exits 0 on a stop and never 75")
	assert.Equal(t, "mixed", u.one(t, "Service", "KillMode"))
	assert.Equal(t, readUnit(t, serviceUnit).one(t, "Service", "TimeoutStopSec"), u.one(t, "Service", "TimeoutStopSec"),
		"the loop stops a tick in flight as the one-shot service does")
	assert.Equal(t, "/etc/monky-deployd/config.yaml", u.one(t, "Unit", "ConditionPathExists"))
	assert.ElementsMatch(t, []string{"monky-deployd.timer", "monky-deployd.service"}, strings.Fields(u.one(t, "Unit", "Conflicts")))
	assert.Equal(t, "multi-user.target", u.one(t, "Install", "WantedBy"))

	svc := readUnit(t, serviceUnit)
	assert.Equal(t, "oneshot", svc.one(t, "Service", "Type"))
	assert.Equal(t, "75", svc.one(t, "Service", "SuccessExitStatus"))
	assert.NotContains(t, svc, "Install", "the timer starts the one-shot service; it is never enabled itself")
}

// TestLoopHasTheServiceSandbox checks that the loop service runs in the one-shot
// service's sandbox, setting for setting: only how each runs and ends may differ.
func TestLoopHasTheServiceSandbox(t *testing.T) {
	own := []string{"Type", "ExecStart", "SuccessExitStatus", "TimeoutStartSec", "Restart", "RestartSec", "RestartPreventExitStatus"}
	svc, loop := readUnit(t, serviceUnit), readUnit(t, loopUnit)
	keys := map[string]bool{}
	for k := range svc["Service"] {
		keys[k] = true
	}
	for k := range loop["Service"] {
		keys[k] = true
	}
	require.Greater(t, len(keys), 30, "no sandbox found in the units")
	for k := range keys {
		if slices.Contains(own, k) {
			continue
		}
		assert.Equal(t, svc["Service"][k], loop["Service"][k], "[Service] %s= differs between the one-shot service and the loop service", k)
	}
	for _, k := range []string{"Wants", "After", "ConditionPathExists", "Documentation"} {
		assert.Equal(t, svc["Unit"][k], loop["Unit"][k], "[Unit] %s=", k)
	}
}

// TestOneBinaryOnly checks that nothing in packaging/, test/systemd and
// docs/OPERATIONS.md names the timer's former second binary (gone with issue #18): one
// binary is built, shipped, checked and documented.
func TestOneBinaryOnly(t *testing.T) {
	gone := "monky-deployd" + "-tick"
	var files []string
	for _, rel := range repoFiles(t) {
		if strings.HasPrefix(rel, "packaging/") || strings.HasPrefix(rel, "test/systemd/") || rel == "docs/OPERATIONS.md" {
			files = append(files, rel)
		}
	}
	require.Greater(t, len(files), 20)
	for _, f := range files {
		assert.False(t, strings.Contains(readRepoFile(t, f), gone), "%s names %s", f, gone)
	}

	// "What is on a box" in docs/OPERATIONS.md has a row for the binary and each
	// unit, and for no second binary
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	_, box, ok := strings.Cut(ops, "\n## What is on a box\n")
	require.True(t, ok, "docs/OPERATIONS.md has no \"What is on a box\"")
	box, _, _ = strings.Cut(box, "\n## ")
	for _, p := range []string{agentBin, "/lib/systemd/system/monky-deployd.service", "/lib/systemd/system/monky-deployd.timer",
		"/lib/systemd/system/monky-deployd-loop.service"} {
		assert.True(t, strings.Contains(box, "| `"+p+"` |"), "\"What is on a box\" has no row for %s", p)
	}
	assert.Equal(t, 1, strings.Count(box, "| `/usr/bin/"), "\"What is on a box\" lists one binary")
}

// TestHoldPathUnit: under the timer, a hold set or cleared starts a tick at once (the
// hold file the agent reads by default); the path unit comes and goes with the timer,
// so that it never starts the one-shot service beside the loop service; both services
// may write the hold directory (the agent's note of what waits).
func TestHoldPathUnit(t *testing.T) {
	dir := deployd.DefaultConfig().Holds.Dir
	u := readUnit(t, holdPathUnit)
	assert.Equal(t, filepath.Join(dir, "hold.json"), u.one(t, "Path", "PathChanged"))
	assert.Equal(t, "monky-deployd.service", u.one(t, "Path", "Unit"))
	assert.Equal(t, "monky-deployd.timer", u.one(t, "Unit", "PartOf"))
	assert.Equal(t, "monky-deployd.timer", u.one(t, "Install", "WantedBy"))
	assert.Equal(t, "monky-deployd-hold.path", readUnit(t, timerUnit).one(t, "Install", "Also"))
	assert.Contains(t, strings.Fields(readUnit(t, loopUnit).one(t, "Unit", "Conflicts")), "monky-deployd.timer",
		"the loop stops the timer, and with it the path unit")
	for _, svc := range []string{serviceUnit, loopUnit} {
		assert.Contains(t, strings.Fields(readUnit(t, svc).one(t, "Service", "ReadWritePaths")), "-"+dir, svc)
	}
}
