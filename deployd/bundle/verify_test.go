package bundle

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

func withManifest(tb testing.TB, edit func(*Manifest), rest ...ent) []byte {
	m := goodManifest()
	edit(&m)
	if rest == nil {
		rest = goodEnts(tb)[1:]
	}
	return tarOf(tb, append([]ent{manifestEnt(tb, m)}, rest...)...)
}

func TestVerifyAccepts(t *testing.T) {
	plain := goodTar(t)
	want := shaOf(t, plain)
	gitArchive := append([]ent{{name: "pax_global_header", typ: tar.TypeXGlobalHeader,
		pax: map[string]string{"comment": "0123456789abcdef"}}}, goodEnts(t)...)
	reordered := goodEnts(t)
	reordered[0], reordered[3] = reordered[3], reordered[0]
	var size int64
	for _, e := range goodEnts(t) {
		size += int64(len(e.body))
	}
	tests := []struct {
		name     string
		data     []byte
		exp      func(*Expect)
		other    bool     // other files than the good bundle's
		files    int      // 0: 3
		services []string // nil: app
	}{
		{name: "plain tar", data: plain},
		{name: "gzip tar", data: gzOf(t, plain)},
		{name: "dot-slash prefix", data: dotSlash(t)},
		{name: "git archive global header", data: tarOf(t, gitArchive...)},
		{name: "manifest last", data: tarOf(t, reordered...)},
		{name: "expected sha", data: plain, exp: func(e *Expect) { e.SHA = want }},
		{name: "expected sha upper case", data: plain, exp: func(e *Expect) { e.SHA = strings.ToUpper(want) }},
		{name: "same serial as live", data: plain, exp: func(e *Expect) { e.LiveSerial = 17 }},
		{name: "explicit rollback", data: plain, exp: func(e *Expect) { e.LiveSerial = 18; e.Rollback = true }},
		{name: "enough disk", data: plain, exp: func(e *Expect) { e.Disk = &Disk{FreeMB: 1, MinFreeMB: 1} }},
		{name: "no vars or secrets", data: withManifest(t, func(m *Manifest) { m.Vars, m.Secrets = nil, nil },
			file("compose.yaml", "services:\n  app:\n    image: x\n"), file("config/app.toml", "")), other: true},
		{name: "allowed privileged", data: composeBundle("services:\n  app:\n    image: x\n    privileged: true\n  db:\n    image: y\n")(t),
			exp: func(e *Expect) { e.AllowPrivileged = []string{"app"} }, other: true, services: []string{"app", "db"}},
		{name: "default in the expression", data: composeBundle("services:\n  app:\n    image: x:${TAG:-latest}\n")(t), other: true},
		{name: "env_file in the bundle", data: composeBundle("services:\n  app:\n    image: x\n    env_file: app.env\n", file("app.env", "A=1\n"))(t),
			other: true, files: 4},
		// The .dockerignore comes after manifest.json and compose.yaml and is not named in
		// them: it must still be kept for the build-context check.
		{name: "build context with a .dockerignore that excludes .env", data: composeBundle("services:\n  app:\n    build: .\n",
			file(".dockerignore", "node_modules\n.env\n"))(t), other: true, files: 4},
		{name: "build context with Dockerfile.dockerignore", data: composeBundle("services:\n  app:\n    build:\n      context: .\n      dockerfile: docker/Dockerfile\n",
			file("docker/Dockerfile", "FROM alpine\nCOPY . /app\n"), file("docker/Dockerfile.dockerignore", "**/.env\n"))(t), other: true, files: 5},
		{name: "several compose files", data: func() []byte {
			m := goodManifest()
			m.ComposeFiles = []string{"compose.yaml", "override.yaml"}
			m.Files = append(m.Files, "override.yaml")
			return tarOf(t, file("override.yaml", "services:\n  worker:\n    image: w\n"), manifestEnt(t, m),
				file("compose.yaml", goodCompose), file("config/app.toml", ""))
		}(), other: true, files: 4, services: []string{"app", "worker"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := verifyWith(tt.data, tt.exp)
			require.NoError(t, err)
			own := shaOf(t, tt.data)
			assert.Equal(t, own, res.SHA)
			if !tt.other {
				assert.Equal(t, want, res.SHA, "same files, same sha")
				assert.Equal(t, goodManifest(), res.Manifest)
				assert.Equal(t, size, res.Size)
			}
			assert.Empty(t, res.Refusals)
			assert.NotNil(t, res.Refusals, "an accepted result has an empty, non-nil refusal list")
			assert.Equal(t, cmp.Or(tt.files, 3), res.Files)
			assert.Equal(t, int64(17), res.Manifest.Serial)
			if tt.services == nil {
				tt.services = []string{"app"}
			}
			assert.Equal(t, tt.services, res.Services)
		})
	}
}

type refusalCase struct {
	name   string
	data   func(tb testing.TB) []byte
	exp    func(*Expect)
	codes  []codes.Code
	detail string // a substring of one of the details
}

func refusalCases() []refusalCase {
	good := func(tb testing.TB) []byte { return goodTar(tb) }
	man := func(edit func(*Manifest)) func(tb testing.TB) []byte {
		return func(tb testing.TB) []byte { return withManifest(tb, edit) }
	}
	hostile := func(e ent) func(tb testing.TB) []byte {
		return func(tb testing.TB) []byte { return tarOf(tb, append(goodEnts(tb), e)...) }
	}
	rawManifest := func(s string) func(tb testing.TB) []byte {
		return func(tb testing.TB) []byte {
			return tarOf(tb, append([]ent{file(ManifestName, s)}, goodEnts(tb)[1:]...)...)
		}
	}
	listed := func(e ...ent) func(tb testing.TB) []byte { // the good bundle and e, e[0] listed in files
		return func(tb testing.TB) []byte {
			return withManifest(tb, func(m *Manifest) { m.Files = append(m.Files, e[0].name) }, append(goodEnts(tb)[1:], e...)...)
		}
	}
	malformed := []codes.Code{codes.BundleMalformed}
	paths, paths2 := []codes.Code{codes.ManifestPaths}, []codes.Code{codes.ManifestPaths, codes.ManifestPaths}
	return []refusalCase{
		// BUNDLE_MALFORMED: the stream.
		{name: "empty stream", data: func(testing.TB) []byte { return nil }, codes: malformed, detail: "empty"},
		{name: "not a tar", data: func(testing.TB) []byte { return []byte(strings.Repeat("hello, world\n", 100)) }, codes: malformed, detail: "not a tar archive"},
		{name: "short garbage", data: func(testing.TB) []byte { return []byte("x") }, codes: malformed},
		{name: "truncated tar", data: func(tb testing.TB) []byte { b := good(tb); return b[:len(b)/2+100] }, codes: malformed, detail: "truncated"},
		{name: "truncated at entry boundary", data: func(tb testing.TB) []byte { b := good(tb); return b[:len(b)-1024] }, codes: malformed, detail: "no end-of-archive marker"},
		{name: "one end block only", data: func(tb testing.TB) []byte { b := good(tb); return b[:len(b)-512] }, codes: malformed, detail: "no end-of-archive marker"},
		{name: "truncated gzip", data: func(tb testing.TB) []byte { b := gzOf(tb, good(tb)); return b[:len(b)-4] }, codes: malformed},
		{name: "truncated gzip header", data: func(tb testing.TB) []byte { return gzOf(tb, good(tb))[:5] }, codes: malformed, detail: "gzip"},
		{name: "corrupt gzip", data: func(tb testing.TB) []byte {
			b := gzOf(tb, good(tb))
			b[len(b)/2] ^= 0xff
			return b
		}, codes: malformed},
		{name: "zstd", data: func(testing.TB) []byte { return []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0} }, codes: malformed, detail: "zstd"},
		{name: "xz", data: func(testing.TB) []byte { return []byte{0xfd, '7', 'z', 'X', 'Z', 0, 0} }, codes: malformed, detail: "xz"},
		{name: "bzip2", data: func(testing.TB) []byte { return []byte("BZh91AY&SY") }, codes: malformed, detail: "bzip2"},
		{name: "data after the archive", data: func(tb testing.TB) []byte { return append(good(tb), "trailing"...) }, codes: malformed, detail: "after the end"},
		{name: "zero padding after the archive is fine but not megabytes", data: func(tb testing.TB) []byte {
			return append(good(tb), make([]byte, maxTrailer+4096)...)
		}, codes: malformed, detail: "padding"},
		{name: "empty archive", data: func(tb testing.TB) []byte { return tarOf(tb) }, codes: malformed, detail: "no manifest.json"},
		{name: "no manifest", data: func(tb testing.TB) []byte { return tarOf(tb, goodEnts(tb)[1:]...) }, codes: malformed, detail: "no manifest.json"},
		{name: "duplicate entry", data: hostile(file("compose.yaml", "services: {}\n")), codes: malformed, detail: `"compose.yaml" appears twice`},
		{name: "duplicate with dot-slash", data: hostile(file("./compose.yaml", goodCompose)), codes: malformed, detail: "appears twice"},
		{name: "duplicate directory", data: hostile(dir("config")), codes: malformed, detail: "appears twice"},
		// BUNDLE_MALFORMED: the manifest.
		{name: "manifest not JSON", data: rawManifest("{"), codes: malformed, detail: "manifest.json"},
		{name: "manifest is an array", data: rawManifest("[]"), codes: malformed, detail: "not a JSON object"},
		{name: "manifest unknown field", data: rawManifest(`{"schema":1,"env_id":"env-dev-01","serial":1,"compose_files":["compose.yaml"],"files":["compose.yaml","config/app.toml"],"extra":1}`), codes: malformed, detail: `unknown field "extra"`},
		{name: "manifest field in another case", data: rawManifest(`{"schema":1,"ENV_ID":"env-dev-01","serial":1,"compose_files":["compose.yaml"],"files":["compose.yaml","config/app.toml"]}`), codes: malformed, detail: `"ENV_ID"`},
		{name: "manifest duplicate field", data: rawManifest(`{"schema":1,"env_id":"env-dev-01","env_id":"env-dev-01","serial":1,"compose_files":["compose.yaml"],"files":["compose.yaml","config/app.toml"]}`), codes: malformed, detail: "appears twice"},
		{name: "manifest missing field", data: rawManifest(`{"schema":1,"env_id":"env-dev-01","compose_files":["compose.yaml"],"files":["compose.yaml","config/app.toml"]}`), codes: malformed, detail: `"serial" is missing`},
		{name: "manifest wrong type", data: rawManifest(`{"schema":1,"env_id":"env-dev-01","serial":"1","compose_files":["compose.yaml"],"files":["compose.yaml","config/app.toml"]}`), codes: malformed, detail: `field "serial"`},
		{name: "manifest trailing data", data: rawManifest(`{"schema":1,"env_id":"env-dev-01","serial":1,"compose_files":["compose.yaml"],"files":["compose.yaml","config/app.toml"]} {}`), codes: malformed, detail: "after the JSON object"},
		{name: "manifest secret ref unknown field", data: rawManifest(`{"schema":1,"env_id":"env-dev-01","serial":1,"compose_files":["compose.yaml"],"files":["compose.yaml","config/app.toml"],"secrets":{"A":{"path":"db","key":"k","mount":"x"}}}`), codes: malformed, detail: `"secrets.A.mount"`},
		{name: "unknown schema", data: man(func(m *Manifest) { m.Schema = 3 }), codes: malformed, detail: "schema is 3, this agent knows 1 to 2"},
		{name: "serial zero", data: man(func(m *Manifest) { m.Serial = 0 }), codes: malformed, detail: "serial is 0"},
		{name: "bad env_id", data: man(func(m *Manifest) { m.EnvID = "prod" }), codes: malformed, detail: "env_id"},
		{name: "negative min_free_mb", data: man(func(m *Manifest) { m.MinFreeMB = -1 }), codes: malformed, detail: "min_free_mb"},
		{name: "no compose files", data: man(func(m *Manifest) { m.ComposeFiles = nil }), codes: malformed, detail: "compose_files is empty"},
		{name: "bad var name", data: man(func(m *Manifest) { m.Vars["1X"] = "v" }), codes: malformed, detail: `"1X"`},
		{name: "reserved var name", data: man(func(m *Manifest) { m.Vars["COMPOSE_FILE"] = "other.yaml" }), codes: malformed, detail: "COMPOSE_"},
		{name: "reserved secret name", data: man(func(m *Manifest) { m.Secrets["DOCKER_HOST"] = SecretRef{Path: "db", Key: "h"} }), codes: malformed, detail: "DOCKER_"},
		{name: "var and secret overlap", data: man(func(m *Manifest) { m.Vars["DB_PASSWORD"] = "x" }), codes: malformed, detail: "both vars and secrets"},
		{name: "secret without key", data: man(func(m *Manifest) { m.Secrets["DB_PASSWORD"] = SecretRef{Path: "db"} }), codes: malformed, detail: "key is empty"},
		{name: "unrepresentable var", data: man(func(m *Manifest) { m.Vars["LOG_LEVEL"] = "a\x00b" }), codes: malformed, detail: `"LOG_LEVEL"`},
		// MANIFEST_PATHS.
		{name: "dot-dot", data: hostile(file("../x", "x")), codes: paths, detail: `".." segment`},
		{name: "absolute", data: hostile(file("/abs", "x")), codes: paths, detail: "absolute"},
		{name: "empty segment", data: hostile(file("a//b", "x")), codes: paths, detail: "empty segment"},
		{name: "dot segment", data: hostile(file("a/./b", "x")), codes: paths, detail: `"." segment`},
		{name: "backslash", data: hostile(file(`a\b`, "x")), codes: paths, detail: "backslash"},
		{name: "control character", data: hostile(file("a\x01b", "x")), codes: paths, detail: "control character"},
		{name: "newline", data: hostile(file("a\nb", "x")), codes: paths, detail: "control character"},
		{name: "invalid UTF-8", data: hostile(file("a\xffb", "x")), codes: paths, detail: "UTF-8"},
		{name: "long segment", data: hostile(file(strings.Repeat("a", 300), "x")), codes: paths, detail: "segment longer"},
		{name: "symlink", data: hostile(ent{name: "link", typ: tar.TypeSymlink, link: "/etc/passwd"}), codes: paths, detail: `"link" is a symlink`},
		{name: "hardlink", data: hostile(ent{name: "hard", typ: tar.TypeLink, link: "compose.yaml"}), codes: paths, detail: "hardlink"},
		{name: "char device", data: hostile(ent{name: "null", typ: tar.TypeChar}), codes: paths, detail: "character device"},
		{name: "block device", data: hostile(ent{name: "sda", typ: tar.TypeBlock}), codes: paths, detail: "block device"},
		{name: "fifo", data: hostile(ent{name: "pipe", typ: tar.TypeFifo}), codes: paths, detail: "fifo"},
		{name: "global header with path", data: hostile(ent{name: "g", typ: tar.TypeXGlobalHeader, pax: map[string]string{"path": "evil"}}), codes: paths, detail: "PAX global header"},
		{name: "file is also a directory", data: hostile(file("config/app.toml/x", "x")), codes: paths2, detail: "which is a file"},
		{name: "directory is then a file", data: func(tb testing.TB) []byte {
			ents := goodEnts(tb)
			return tarOf(tb, ents[0], ents[1], ents[3], file("config", "x"))
		}, codes: paths2, detail: "earlier entries are inside it"},
		{name: "bundled .env", data: listed(file(".env", "COMPOSE_FILE=evil.yaml\n")), codes: paths2, detail: "writes the release's .env itself"},
		// The release's root .env is the agent's: a file inside ".env/" makes a directory of
		// that name. Without the refusal the bundle verifies, costs a lease, and staging fails.
		{name: ".env directory by implication", data: listed(file(".env/x", "A=1\n")), codes: paths2, detail: "reserved"},
		{name: "bundled labels file", data: listed(file(LabelsFileName, "services: {}\n")), codes: paths2,
			detail: "writes the release's .deployd-labels.yaml itself"},
		{name: "nested .env is an ordinary file", data: listed(file("config/.env", "A=1\n"), file("x", "")), codes: paths,
			detail: `"x" is in the bundle but not in files`},
		{name: "unlisted file", data: hostile(file("extra.txt", "x")), codes: paths, detail: `"extra.txt" is in the bundle but not in files`},
		{name: "missing file", data: man(func(m *Manifest) { m.Files = append(m.Files, "gone.txt") }), codes: paths, detail: `"gone.txt" is listed but not in the bundle`},
		{name: "compose file not in files", data: man(func(m *Manifest) { m.ComposeFiles = append(m.ComposeFiles, "config/app.toml", "other.yaml") }), codes: paths, detail: `"other.yaml" is not in files`},
		{name: "files lists the manifest", data: man(func(m *Manifest) { m.Files = append(m.Files, ManifestName) }), codes: paths, detail: "lists manifest.json"},
		{name: "files lists a path twice", data: man(func(m *Manifest) { m.Files = append(m.Files, "compose.yaml") }), codes: paths, detail: "listed twice"},
		{name: "files lists an unsafe path", data: man(func(m *Manifest) { m.Files = append(m.Files, "../etc/passwd") }), codes: paths, detail: `".." segment`},
		// ENV_MISMATCH, SHA_MISMATCH, ROLLBACK, DISK_LOW.
		{name: "env mismatch", data: good, exp: func(e *Expect) { e.EnvID = "env-dev-02" }, codes: []codes.Code{codes.EnvMismatch}, detail: "env_id is env-dev-01, this box is env-dev-02"},
		{name: "sha mismatch", data: good, exp: func(e *Expect) { e.SHA = strings.Repeat("0", 64) }, codes: []codes.Code{codes.SHAMismatch}, detail: strings.Repeat("0", 64)},
		{name: "rollback", data: good, exp: func(e *Expect) { e.LiveSerial = 18 }, codes: []codes.Code{codes.Rollback}, detail: "serial 17 is lower than the live release's 18"},
		{name: "disk below twice the size", data: good, exp: func(e *Expect) { e.Disk = &Disk{FreeMB: 0} }, codes: []codes.Code{codes.DiskLow}, detail: "needs 1 MiB"},
		{name: "disk below the box's minimum", data: good, exp: func(e *Expect) { e.Disk = &Disk{FreeMB: 100, MinFreeMB: 1024} }, codes: []codes.Code{codes.DiskLow}, detail: "needs 1024 MiB"},
		{name: "disk below the manifest's minimum", data: man(func(m *Manifest) { m.MinFreeMB = 512 }), exp: func(e *Expect) { e.Disk = &Disk{FreeMB: 100} }, codes: []codes.Code{codes.DiskLow}, detail: "needs 512 MiB"},
		// SECRET_PATH.
		{name: "secret path dot-dot", data: secretPath("../env-dev-02/db"), codes: []codes.Code{codes.SecretPath}, detail: "DB_PASSWORD"},
		{name: "secret path absolute", data: secretPath("/db"), codes: []codes.Code{codes.SecretPath}, detail: "absolute"},
		{name: "secret path empty", data: secretPath(""), codes: []codes.Code{codes.SecretPath}, detail: "empty"},
		{name: "secret path another env", data: secretPath("env-prod-01/db"), codes: []codes.Code{codes.SecretPath}, detail: "another env"},
		{name: "secret path envs", data: secretPath("envs/env-prod-01/db"), codes: []codes.Code{codes.SecretPath}, detail: "another env"},
		{name: "secret path empty segment", data: secretPath("a//db"), codes: []codes.Code{codes.SecretPath}, detail: "empty segment"},
		{name: "secret path dot", data: secretPath("./db"), codes: []codes.Code{codes.SecretPath}, detail: `"." segment`},
		{name: "secret path trailing slash", data: secretPath("db/"), codes: []codes.Code{codes.SecretPath}, detail: "ends with /"},
		{name: "secret path backslash", data: secretPath(`a\db`), codes: []codes.Code{codes.SecretPath}, detail: "backslash"},
		{name: "secret path percent", data: secretPath("%2e%2e/db"), codes: []codes.Code{codes.SecretPath}, detail: "character outside"},
		{name: "secret path control", data: secretPath("d\nb"), codes: []codes.Code{codes.SecretPath}, detail: "character outside"},
		// Limits.
		{name: "MaxEntries", data: good, exp: func(e *Expect) { e.Limits.MaxEntries = 2 }, codes: malformed, detail: "MaxEntries"},
		{name: "MaxFileSize", data: good, exp: func(e *Expect) { e.Limits.MaxFileSize = 100 }, codes: malformed, detail: "MaxFileSize"},
		{name: "MaxTotalSize", data: good, exp: func(e *Expect) { e.Limits.MaxTotalSize = 300 }, codes: malformed, detail: "MaxTotalSize"},
		{name: "MaxManifestSize", data: good, exp: func(e *Expect) { e.Limits.MaxManifestSize = 10 }, codes: malformed, detail: "MaxManifestSize"},
		{name: "MaxComposeFileSize", data: good, exp: func(e *Expect) { e.Limits.MaxComposeFileSize = 10 }, codes: malformed, detail: "MaxComposeFileSize"},
		{name: "MaxBufferSize with the manifest last", data: func(tb testing.TB) []byte {
			e := goodEnts(tb)
			return tarOf(tb, e[1], e[2], e[3], e[0])
		}, exp: func(e *Expect) { e.Limits.MaxBufferSize = 10 }, codes: malformed, detail: "buffer budget"},
		{name: "MaxHeaderSize", data: hostile(ent{name: "x", pax: map[string]string{"comment": strings.Repeat("c", 8000)}}),
			exp: func(e *Expect) { e.Limits.MaxHeaderSize = 4096 }, codes: malformed, detail: "MaxHeaderSize"},
		// Several at once: every refusal comes back, sorted.
		{name: "several refusals", data: func(tb testing.TB) []byte {
			return withManifest(tb, func(m *Manifest) { m.Secrets["API_KEY"] = SecretRef{Path: "../x", Key: "k"} },
				append(goodEnts(tb)[1:], ent{name: "evil", typ: tar.TypeSymlink, link: "/"}, file("stray", "x"))...)
		}, exp: func(e *Expect) { e.EnvID = "env-dev-09"; e.LiveSerial = 20 },
			codes: []codes.Code{codes.EnvMismatch, codes.ManifestPaths, codes.ManifestPaths, codes.Rollback, codes.SecretPath}},
	}
}

// allRefusalCases are the refusal cases of Verify's checks, of compose's and of hooks'.
func allRefusalCases() []refusalCase {
	return slices.Concat(refusalCases(), composeCases(), hookCases())
}

func secretPath(p string) func(tb testing.TB) []byte {
	return func(tb testing.TB) []byte {
		return withManifest(tb, func(m *Manifest) { m.Secrets["DB_PASSWORD"] = SecretRef{Path: p, Key: "password"} })
	}
}

func TestVerifyRefusals(t *testing.T) {
	for _, tt := range allRefusalCases() {
		t.Run(tt.name, func(t *testing.T) {
			res, err := verifyWith(tt.data(t), tt.exp)
			require.ErrorIs(t, err, ErrRefused)
			var re *RefusedError
			require.ErrorAs(t, err, &re)
			require.NotNil(t, res)
			assert.Equal(t, res.Refusals, re.Refusals)
			assert.Equal(t, res.SHA, re.SHA)
			assert.Equal(t, tt.codes, refusalCodes(re.Refusals), "refusals: %v", re.Refusals)
			assert.Equal(t, re.Refusals[0].Code, re.Code())
			if tt.detail != "" {
				assert.Contains(t, fmt.Sprint(re.Refusals), tt.detail)
			}
			assert.IsNonDecreasing(t, details(re.Refusals))
		})
	}
}

// details returns "CODE\x00detail" for each refusal, to check the sort order.
func details(rs []Refusal) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Code) + "\x00" + r.Detail
	}
	return out
}

func TestVerifyEveryCodeHasACase(t *testing.T) {
	seen := map[codes.Code]bool{}
	for _, tt := range allRefusalCases() {
		for _, c := range tt.codes {
			seen[c] = true
		}
	}
	for _, c := range codes.Refusals() {
		assert.True(t, seen[c], "no test case refuses with %s", c)
	}
}

func TestVerifySHAComputedWhenRefused(t *testing.T) {
	data := tarOf(t, append(goodEnts(t), ent{name: "l", typ: tar.TypeSymlink, link: "x"})...)
	want := shaOf(t, data)
	res, err := Verify(context.Background(), bytes.NewReader(data), expect())
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, want, res.SHA)
	assert.Equal(t, want, goodSHA(t), "a symlink does not change the sha: find -type f skips it")
}

func goodSHA(tb testing.TB) string { return shaOf(tb, goodTar(tb)) }

// TestVerifyErrorsAreNotRefusals: an invalid Expect, a failing reader and a cancelled
// context are errors of the call, never refusals of the bundle, and give no result.
func TestVerifyErrorsAreNotRefusals(t *testing.T) {
	data := goodTar(t)
	failing := func(after int) io.Reader { return io.MultiReader(bytes.NewReader(data[:after]), &failingReader{}) }
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	streaming, stop := context.WithCancel(bg) // cancelled by its reader after the first read
	defer stop()
	for name, tt := range map[string]struct {
		ctx context.Context
		r   io.Reader
		exp Expect
		is  error
	}{
		"no env":                    {bg, bytes.NewReader(data), Expect{}, ErrInvalidArgument},
		"bad sha":                   {bg, bytes.NewReader(data), Expect{EnvID: testEnv, SHA: "abc"}, ErrInvalidArgument},
		"reader fails at 0":         {bg, failing(0), expect(), errBroken},
		"reader fails at 3":         {bg, failing(3), expect(), errBroken},
		"reader fails after 700":    {bg, failing(700), expect(), errBroken},
		"cancelled before":          {cancelled, bytes.NewReader(data), expect(), context.Canceled},
		"cancelled while streaming": {streaming, &cancelReader{r: bytes.NewReader(data), cancel: stop}, expect(), context.Canceled},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Verify(tt.ctx, tt.r, tt.exp)
			require.ErrorIs(t, err, tt.is)
			assert.NotErrorIs(t, err, ErrRefused)
			assert.Nil(t, res)
		})
	}
}

type failingReader struct{ after int }

var errBroken = errors.New("connection reset")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errBroken
	}
	n := min(len(p), f.after)
	for i := range p[:n] {
		p[i] = 0
	}
	f.after -= n
	return n, nil
}

type cancelReader struct {
	r      io.Reader
	cancel func()
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 512)])
	c.cancel()
	return n, err
}

func TestRefusedErrorJSONAndText(t *testing.T) {
	e := &RefusedError{SHA: "abc", Refusals: []Refusal{{codes.EnvMismatch, "env_id is a"}, {codes.Rollback, "serial"}}}
	assert.Equal(t, "bundle refused (sha abc): ENV_MISMATCH: env_id is a; ROLLBACK: serial", e.Error())
	assert.Equal(t, codes.EnvMismatch, e.Code())
	assert.True(t, e.Has(codes.Rollback))
	assert.False(t, e.Has(codes.DiskLow))
	b, err := json.Marshal(e.Refusals)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"code":"ENV_MISMATCH","detail":"env_id is a"},{"code":"ROLLBACK","detail":"serial"}]`, string(b))
	wrapped := fmt.Errorf("tick: %w", e)
	assert.ErrorIs(t, wrapped, ErrRefused)
	var c interface{ Code() codes.Code }
	require.ErrorAs(t, wrapped, &c)
	assert.Equal(t, codes.EnvMismatch, c.Code())
	assert.Equal(t, codes.BundleMalformed, (&RefusedError{}).Code())
}

func TestRefusalsAreBounded(t *testing.T) {
	ents := goodEnts(t)
	for i := range maxRefusals + 50 {
		ents = append(ents, ent{name: fmt.Sprintf("l%d", i), typ: tar.TypeSymlink, link: "x"})
	}
	res, err := Verify(context.Background(), bytes.NewReader(tarOf(t, ents...)), expect())
	require.ErrorIs(t, err, ErrRefused)
	assert.Len(t, res.Refusals, maxRefusals+1)
	assert.Contains(t, res.Refusals[maxRefusals].Detail, "further refusals not listed")
}

func TestSecretValuesNeverInDetails(t *testing.T) {
	const planted = "s3cr3t-VALUE-do-not-print"
	m := goodManifest()
	m.Vars["LOG_LEVEL"] = planted + "\x00"
	m.Vars["OTHER"] = planted
	data := tarOf(t, append([]ent{manifestEnt(t, m)}, goodEnts(t)[1:]...)...)
	_, err := Verify(context.Background(), bytes.NewReader(data), Expect{EnvID: "env-dev-02", LiveSerial: 99})
	require.ErrorIs(t, err, ErrRefused)
	assert.NotContains(t, err.Error(), planted)
	_, err = RenderEnv(map[string]string{"X": planted + "\x00"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), planted)
	assert.Contains(t, err.Error(), `"X"`)
}

// TestVerifyGODEBUGInsecurePath checks that the tar reader's optional error for
// non-local names (GODEBUG=tarinsecurepath=0, which a binary may set) gives the
// same refusal as without it.
func TestVerifyGODEBUGInsecurePath(t *testing.T) {
	t.Setenv("GODEBUG", "tarinsecurepath=0")
	data := tarOf(t, append([]ent{file("../x", "x")}, goodEnts(t)...)...)
	res, err := Verify(context.Background(), bytes.NewReader(data), expect())
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, fmt.Sprint(res.Refusals), `entry "../x": path has a ".." segment`)
	assert.Len(t, res.Refusals, 1, "the reader goes on after the insecure path: %v", res.Refusals)
	err = Extract(context.Background(), bytes.NewReader(data), t.TempDir(), goodSHA(t), Limits{})
	require.ErrorIs(t, err, ErrRefused)
}

// Some docker compose releases copy every .env entry that the process environment
// lacks into their own environment (os.Setenv), and the agent runs compose with PATH
// only. A bundle variable there reaches compose itself and the programs it runs
// (credential helpers, buildx, ssh): LD_PRELOAD of a bundle file is code on the host
// as root, a proxy or CA variable redirects compose's registry traffic, BUILDX_/
// BUILDKIT_ variables choose the builder. Such names are refused like COMPOSE_/DOCKER_.
func TestCheckEnvNameRefusesProcessVariables(t *testing.T) {
	for _, name := range []string{
		"LD_PRELOAD", "LD_LIBRARY_PATH", "ld_preload", "PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK",
		"HTTP_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
		"BUILDX_CONFIG", "BUILDKIT_HOST", "COMPOSE_FILE", "DOCKER_HOST",
	} {
		assert.NotEmpty(t, checkEnvName(name), name)
	}
	for _, name := range []string{"LOG_LEVEL", "DB_PASSWORD", "PATHNAME", "HOMEPAGE_URL", "APP_HOME", "LDAP_URL", "PROXY_URL"} {
		assert.Empty(t, checkEnvName(name), name)
	}
}

// TestOnDisk: a release's size is counted as the file system stores it once the
// block size is known (each file in whole blocks, each directory one block), and its
// inodes are its files, its directories, the release directory and its .env.
func TestOnDisk(t *testing.T) {
	files := []fileSum{{path: "manifest.json", size: 300}, {path: "compose.yaml", size: 5000}, {path: "conf/a/x", size: 1}, {path: "conf/b", size: 0}}
	for _, c := range []struct {
		name             string
		blockSize        int64
		bytes, inodeWant int64
	}{
		{"bytes", 0, 5301, 8},
		{"4 KiB blocks", 4096, (1 + 2 + 1 + 0 + 3) * 4096, 8},
		{"512 B blocks", 512, (1 + 10 + 1 + 0 + 3) * 512, 8},
	} {
		b, n := onDisk(files, c.blockSize)
		assert.Equal(t, c.bytes, b, c.name)
		assert.Equal(t, c.inodeWant, n, c.name)
	}
}

// TestDiskLowCountsBlocksAndInodes: 2000 one-byte files pass a byte count with 1 MiB
// free, but take 2000 blocks (8 MiB in 4 KiB blocks) and 2000 inodes: DISK_LOW
// names the MiB and the inodes before the lease, instead of a staging that fails
// after it.
func TestDiskLowCountsBlocksAndInodes(t *testing.T) {
	files := make([]fileSum, 2000)
	for i := range files {
		files[i] = fileSum{path: "f/" + string(rune('a'+i%26)) + "/" + strconv.Itoa(i), size: 1}
	}
	m := &Manifest{}
	for _, c := range []struct {
		name   string
		disk   Disk
		refuse []string
	}{
		{"bytes only: passes", Disk{FreeMB: 1}, nil},
		{"blocks: refused", Disk{FreeMB: 1, BlockSize: 4096}, []string{"1 MiB free under deploy_dir, the release needs 16 MiB"}},
		{"blocks with room", Disk{FreeMB: 16, BlockSize: 4096}, nil},
		{"inodes: refused", Disk{FreeMB: 100, BlockSize: 4096, FreeInodes: 3000, TotalInodes: 100000}, []string{"3000 inodes free under deploy_dir, the release needs 4058 (twice its 2029 files and directories)"}},
		{"inodes not counted", Disk{FreeMB: 100, BlockSize: 4096, FreeInodes: 0, TotalInodes: 0}, nil},
		{"inodes with room", Disk{FreeMB: 100, BlockSize: 4096, FreeInodes: 5000, TotalInodes: 100000}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rs refusals
			checkDisk(m, c.disk, files, &rs)
			var got []string
			for _, r := range rs.list {
				assert.Equal(t, "DISK_LOW", string(r.Code))
				got = append(got, r.Detail)
			}
			if c.refuse == nil {
				assert.Empty(t, got)
				return
			}
			assert.Len(t, got, len(c.refuse))
			for i := range c.refuse {
				assert.Contains(t, got[i], c.refuse[i])
			}
		})
	}
}
