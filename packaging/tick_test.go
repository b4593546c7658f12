package packaging_test

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The timer's service runs monky-deployd-tick, which does a steady box's idle tick
// itself and execs monky-deployd in its own directory for everything else. These tests
// keep the packaging true to that: the unit runs the tick with flags it accepts, and
// every way of installing puts both binaries side by side. check.sh checks the built
// .deb itself (both files, 0755, the tick handing `version` over to the agent).

const (
	tickBin  = "/usr/bin/monky-deployd-tick"
	agentBin = "/usr/bin/monky-deployd"
)

// execStart returns the fields of the service's one ExecStart= line.
func execStart(t *testing.T) []string {
	t.Helper()
	unit := readRepoFile(t, "packaging/systemd/monky-deployd.service")
	var lines []string
	for line := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			lines = append(lines, v)
		}
	}
	require.Len(t, lines, 1, "the service has one ExecStart=")
	return strings.Fields(lines[0])
}

// TestServiceRunsTheTick checks that ExecStart= is `monky-deployd-tick run` with only
// the flags the tick accepts (parseRun's): any other flag would hand every tick over to
// the agent, and a tick would pay the agent's start-up again.
func TestServiceRunsTheTick(t *testing.T) {
	f := execStart(t)
	require.GreaterOrEqual(t, len(f), 2)
	assert.Equal(t, tickBin, f[0], "ExecStart= runs the tick binary")
	assert.Equal(t, "run", f[1])

	src := readRepoFile(t, "cmd/monky-deployd-tick/tick.go")
	var accepted []string
	for _, m := range regexp.MustCompile(`fs\.String\("([a-z-]+)"`).FindAllStringSubmatch(src, -1) {
		accepted = append(accepted, "--"+m[1])
	}
	require.NotEmpty(t, accepted, "no flags found in cmd/monky-deployd-tick/tick.go")
	flags := f[2:]
	require.Zero(t, len(flags)%2, "ExecStart= flags come as --flag VALUE: %q", flags)
	var got []string
	for i := 0; i < len(flags); i += 2 {
		assert.Contains(t, accepted, flags[i], "monky-deployd-tick does not accept %s: every tick would be handed over", flags[i])
		assert.False(t, strings.HasPrefix(flags[i+1], "-"), "%s has no value", flags[i])
		got = append(got, flags[i])
	}
	slices.Sort(got)
	assert.Equal(t, []string{"--config", "--metrics-file"}, got, "the service passes --config and --metrics-file")
}

// TestTickFindsTheAgentWhereThePackagePutsIt checks that the agent the tick execs (its
// agentName, in the tick's own directory) is the agent every installer puts there.
func TestTickFindsTheAgentWhereThePackagePutsIt(t *testing.T) {
	m := regexp.MustCompile(`(?m)^const agentName = "([^"]+)"`).FindStringSubmatch(readRepoFile(t, "cmd/monky-deployd-tick/tick.go"))
	require.NotNil(t, m, "no agentName in cmd/monky-deployd-tick/tick.go")
	assert.Equal(t, agentBin, path.Join(path.Dir(execStart(t)[0]), m[1]), "the tick would exec another file than the packaged agent")

	deb := readRepoFile(t, "packaging/build-deb.sh")
	assert.Contains(t, deb, `tickpkg=${4:-./cmd/monky-deployd-tick}`, "build-deb.sh builds the tick by default")
	assert.Contains(t, deb, `for bin in "monky-deployd:$gopkg" "monky-deployd-tick:$tickpkg"; do`, "build-deb.sh builds both binaries alike")
	assert.Contains(t, deb, `-o "$root/usr/bin/${bin%%:*}"`, "build-deb.sh puts both in /usr/bin")

	// The kit and the role install the .deb; each checks that both binaries are there.
	kit := readRepoFile(t, "packaging/install.sh")
	assert.Contains(t, kit, "for bin in "+tickBin+" "+agentBin+"; do", "install.sh checks both binaries")
	role := readRepoFile(t, "packaging/ansible/roles/monky_deployd/tasks/main.yml")
	for _, b := range []string{"- monky-deployd\n", "- monky-deployd-tick\n"} {
		assert.Contains(t, role, b, "the ansible role checks /usr/bin/%s", strings.TrimSpace(strings.TrimPrefix(b, "- ")))
	}
	// The box test of test/systemd builds the .deb with both.
	box := readRepoFile(t, "test/systemd/run.sh")
	assert.Contains(t, box, "packaging/build-deb.sh \"$version\" \"$work/out\" ./cmd/monky-deployd ./cmd/monky-deployd-tick")
	assert.Contains(t, box, tickBin)
}

// TestOperationsListsBothBinaries checks that "What is on a box" in docs/OPERATIONS.md
// has a row for each binary.
func TestOperationsListsBothBinaries(t *testing.T) {
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	_, box, ok := strings.Cut(ops, "\n## What is on a box\n")
	require.True(t, ok, "docs/OPERATIONS.md has no \"What is on a box\"")
	box, _, _ = strings.Cut(box, "\n## ")
	for _, b := range []string{agentBin, tickBin} {
		assert.Contains(t, box, "| `"+b+"` |", "\"What is on a box\" has no row for %s", b)
	}
}
