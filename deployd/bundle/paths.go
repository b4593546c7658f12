package bundle

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/monky/monky-deployd/internal/envfile"
)

// checkLength returns why the path p is empty or longer than limit bytes (checkPath,
// checkSecretPath), "" when it is neither.
func checkLength(p string, limit int) string {
	switch {
	case p == "":
		return "path is empty"
	case len(p) > limit:
		return fmt.Sprintf("path is longer than %d bytes", limit)
	}
	return ""
}

// checkPath checks a bundle path (a tar entry name with any "./" prefix and, for a
// directory, any trailing "/" already removed, or a path named in the manifest). It
// returns "" for a safe path or the reason it is unsafe; the reason never repeats the
// path, callers quote it.
func checkPath(p string) string {
	if why := checkLength(p, maxPathLen); why != "" {
		return why
	}
	switch {
	case !utf8.ValidString(p):
		return "path is not valid UTF-8"
	case strings.HasPrefix(p, "/"):
		return "path is absolute"
	case strings.Contains(p, `\`):
		return "path contains a backslash"
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "path contains a control character"
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if why := checkSegment(seg); why != "" {
			return why
		}
		if len(seg) > maxSegmentLen {
			return fmt.Sprintf("path has a segment longer than %d bytes", maxSegmentLen)
		}
	}
	return ""
}

// checkSegment returns why seg cannot be a segment of any path the agent accepts (a
// bundle path or a secret path), or "": it is empty, "." or "..".
func checkSegment(seg string) string {
	switch seg {
	case "":
		return "path has an empty segment"
	case ".":
		return `path has a "." segment`
	case "..":
		return `path has a ".." segment`
	}
	return ""
}

// EnvFileName is the release's .env, which the agent renders itself (RenderEnv); a
// bundle may not carry a file or directory of that name at its root.
const EnvFileName = ".env"

// LabelsFileName is the compose file the agent writes into a release whose services
// mount compose configs or secrets: a label per service with a digest of where they
// come from, so that compose recreates such a service on every new release (compose
// itself hashes a config by its name only, and would keep mounting the previous
// release's file). The agent passes it to compose after manifest.compose_files. A
// bundle may not carry a file or directory of that name at its root.
const LabelsFileName = ".deployd-labels.yaml"

// reservedPath says why a bundle may not hold the path name ("" when it may): the
// agent writes the release's .env and its LabelsFileName itself.
func reservedPath(name string) string {
	for _, r := range []string{EnvFileName, LabelsFileName} {
		if name == r || strings.HasPrefix(name, r+"/") {
			return "path is reserved: the agent writes the release's " + r + " itself"
		}
	}
	return ""
}

// reservedEnvPrefixes are variable name prefixes a bundle may not set: compose and
// the docker CLI read them from .env and the environment to decide which files to
// load, which project to act on and which daemon to talk to, so a bundle that set
// them could run something other than what was verified. Some compose releases also
// copy every .env entry the process environment lacks into their own environment
// (the agent runs compose with PATH only), so variables that steer compose's builder
// (BUILDX_, BUILDKIT_) and the dynamic loader of the programs it runs (LD_) are
// reserved too.
var reservedEnvPrefixes = []string{"COMPOSE_", "DOCKER_", "BUILDX_", "BUILDKIT_", "LD_"}

// reservedEnvNames are process variables a bundle may not set, for the same reason:
// they would reach compose itself and the programs it runs (credential helpers, ssh),
// choosing which programs run, where temporary files go, which proxy and which CA
// the registry traffic uses.
var reservedEnvNames = map[string]bool{
	"PATH": true, "HOME": true, "TMPDIR": true, "SSH_AUTH_SOCK": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
}

// checkEnvName returns "" for a usable variable name or the reason it is not.
func checkEnvName(name string) string {
	if !envfile.ValidName(name) {
		return "is not a variable name (" + envfile.NamePattern + ")"
	}
	up := strings.ToUpper(name)
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(up, p) {
			return fmt.Sprintf("uses the reserved prefix %s (compose and docker read these themselves)", p)
		}
	}
	if reservedEnvNames[up] {
		return "is reserved (a process variable that would reach compose and the programs it runs)"
	}
	return ""
}

// secretSegRE is the shape of one segment of a secret path.
var secretSegRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// maxSecretPathLen bounds a secret path; KV paths are short names.
const maxSecretPathLen = 512

// checkSecretPath returns "" for a secret path that stays under the env's root
// (<kv_mount>/data/envs/<env_id>/<path>), or the reason it does not. The rules are
// an allow-list: segments of letters, digits, '_', '.', '-', separated by single
// '/', no "." or ".." segment, and a first segment that cannot name another env
// ("envs", or anything starting with "env-"). The path is never URL-decoded by the
// agent, so '%', '?' and '#' are outside the allow-list too.
func checkSecretPath(p string) string {
	if why := checkLength(p, maxSecretPathLen); why != "" {
		return why
	}
	switch {
	case strings.HasPrefix(p, "/"):
		return "path is absolute"
	case strings.HasSuffix(p, "/"):
		return "path ends with /"
	case strings.Contains(p, `\`):
		return "path contains a backslash"
	}
	segs := strings.Split(p, "/")
	for _, seg := range segs {
		if why := checkSegment(seg); why != "" {
			return why
		}
		if !secretSegRE.MatchString(seg) {
			return "path has a character outside [A-Za-z0-9_.-/]"
		}
	}
	first := strings.ToLower(segs[0])
	if first == "envs" || strings.HasPrefix(first, "env-") {
		return "path names another env (first segment is envs or env-*)"
	}
	return ""
}
