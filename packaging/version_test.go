package packaging_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
)

var (
	// DEFAULT_VERSION="0.1.0" on a line of its own.
	installVersion = regexp.MustCompile(`(?m)^DEFAULT_VERSION="([^"]*)"$`)
	// monky_deployd_version: "0.1.0" in the role's defaults.
	roleVersion = regexp.MustCompile(`(?m)^monky_deployd_version: "([^"]*)"$`)
	// A Keep a Changelog release heading: "## [0.1.0] - 2026-11-30". "## [Unreleased]"
	// has no date and does not match, so the newest release is the first match.
	changelogRelease = regexp.MustCompile(`(?m)^## \[([^\]]+)\] - (\d{4}-\d{2}-\d{2})\s*$`)
)

// firstMatch returns the first capture group of re in data, or "" when it does not match.
func firstMatch(re *regexp.Regexp, data string) string {
	m := re.FindStringSubmatch(data)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestOneVersion checks the patterns that find the version in install.sh, the role and
// the CHANGELOG, then that the three agree with deployd.Version.
func TestOneVersion(t *testing.T) {
	tests := []struct {
		name string
		re   *regexp.Regexp
		in   string
		want string
	}{
		{"install.sh", installVersion, "set -e\n\nDEFAULT_VERSION=\"1.2.3\"\n", "1.2.3"},
		{"install.sh indented is not the default", installVersion, "  DEFAULT_VERSION=\"1.2.3\"\n", ""},
		{"role", roleVersion, "---\nmonky_deployd_version: \"0.4.0\"\n", "0.4.0"},
		{"changelog newest first", changelogRelease, "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-12-01\n\n## [0.1.0] - 2026-11-30\n", "0.2.0"},
		{"changelog without date is not a release", changelogRelease, "## [Unreleased]\n## [0.3.0]\n", ""},
		{"changelog with CRLF", changelogRelease, "## [0.1.0] - 2026-11-30\r\n", "0.1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, firstMatch(tt.re, tt.in))
		})
	}

	// the version places agree: a release bumps all of them together
	// (docs/OPERATIONS.md, "Releasing")
	places := map[string]string{
		"packaging/install.sh DEFAULT_VERSION":                firstMatch(installVersion, readRepoFile(t, "packaging/install.sh")),
		"packaging/ansible/.../defaults/main.yml":             firstMatch(roleVersion, readRepoFile(t, "packaging/ansible/roles/monky_deployd/defaults/main.yml")),
		"CHANGELOG.md newest '## [X.Y.Z] - YYYY-MM-DD' entry": firstMatch(changelogRelease, readRepoFile(t, "CHANGELOG.md")),
	}
	require.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+`, deployd.Version)
	for place, v := range places {
		assert.Equal(t, deployd.Version, v, "%s disagrees with deployd.Version", place)
	}
}

// TestScriptsReadTheVersion checks that the shell scripts that read the version from Go
// source (build-deb.sh refuses a VERSION that differs; check.sh and test/systemd build
// the .deb of it) read a file that holds `const Version = "<deployd.Version>"`.
func TestScriptsReadTheVersion(t *testing.T) {
	sedVersion := regexp.MustCompile(`sed -n 's/\^const Version = [^\n]*?p' "?(?:\$repo/)?([A-Za-z0-9_/]+\.go)"?\)`)
	for _, script := range []string{"packaging/build-deb.sh", "packaging/check.sh", "test/systemd/run.sh"} {
		m := sedVersion.FindStringSubmatch(readRepoFile(t, script))
		if !assert.NotNil(t, m, "%s does not read the version with sed", script) {
			continue
		}
		src := readRepoFile(t, m[1])
		assert.Contains(t, src, "\nconst Version = \""+deployd.Version+"\"\n", "%s reads the version from %s, which does not hold deployd.Version", script, m[1])
	}
}
