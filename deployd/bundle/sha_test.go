package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// shaVectorFiles are the files of the sha test vector: names chosen so that
// bytewise order differs from locale order and from entry order.
var shaVectorFiles = []ent{
	file("manifest.json", `{"schema":1}`),
	file("b.txt", "b\n"),
	file("B.txt", "B\n"),
	file("a/z.txt", ""),
	file("a-b/c.txt", "dash\n"),
	file("a.b", "dot\n"),
	file("_under", "u"),
	file("sp ace.txt", "space in name\n"),
	file("ünï.txt", "utf-8\n"),
	file("deep/er/still/x.bin", "\x00\x01\x02\xff"),
}

// TestSHAKnownVector pins the formula on fixed content, so that a change of the
// formula cannot pass unnoticed even where sha256sum is missing.
func TestSHAKnownVector(t *testing.T) {
	got := shaOf(t, tarOf(t, shaVectorFiles...))
	want, err := os.ReadFile(filepath.Join("testdata", "sha_vector.txt"))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(want)), got)
}

// coreutilsSHA runs the coreutils line of docs/BUNDLE.md in dir; without one of its
// tools the test is skipped (TestSHAKnownVector and TestPackReproducible still check
// the formula).
func coreutilsSHA(t *testing.T, dir string) string {
	t.Helper()
	for _, tool := range []string{"find", "sort", "xargs", "sha256sum", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH", tool)
		}
	}
	cmd := exec.Command("sh", "-c", `find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`)
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.Fields(string(out))[0]
}

// writeEnts writes the regular files and directories of ents under dir.
func writeEnts(t *testing.T, dir string, ents []ent) {
	t.Helper()
	for _, e := range ents {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		if e.typ == tar.TypeDir {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(e.body), 0o644))
	}
}

// TestSHAMatchesCoreutils runs the coreutils pipeline of docs/BUNDLE.md on an unpacked
// directory and compares.
func TestSHAMatchesCoreutils(t *testing.T) {
	d := t.TempDir()
	writeEnts(t, d, append(shaVectorFiles, dir("empty-dir/")))
	want := coreutilsSHA(t, d)

	got := shaOf(t, tarOf(t, shaVectorFiles...))
	assert.Equal(t, want, got)

	vec, err := os.ReadFile(filepath.Join("testdata", "sha_vector.txt"))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(vec)), want, "the pinned vector is what coreutils computes")

	// A tar written by GNU tar from the directory, "./" prefixes and all.
	if _, err := exec.LookPath("tar"); err == nil {
		out, err := exec.Command("tar", "-C", d, "-cf", "-", ".").Output()
		require.NoError(t, err)
		got := shaOf(t, out)
		assert.Equal(t, want, got, "GNU tar's archive of the directory")
	}
}

func TestSHAIgnoresOrderMetadataAndCompression(t *testing.T) {
	base := tarOf(t, shaVectorFiles...)
	want := shaOf(t, base)

	reversed := make([]ent, 0, len(shaVectorFiles)+2)
	for i := len(shaVectorFiles) - 1; i >= 0; i-- {
		e := shaVectorFiles[i]
		e.mode = 0o600
		reversed = append(reversed, e)
	}
	reversed = append(reversed, dir("extra-dir/"), ent{name: "link", typ: tar.TypeSymlink, link: "b.txt"})

	var other bytes.Buffer
	tw := tar.NewWriter(&other)
	for _, e := range shaVectorFiles {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "./" + e.name, Typeflag: tar.TypeReg, Size: int64(len(e.body)),
			Mode: 0o4777, Uid: 1234, Gid: 99, Uname: "someone", ModTime: time.Unix(1, 0), Format: tar.FormatGNU}))
		_, err := tw.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())

	for name, data := range map[string][]byte{
		"gzip":                               gzOf(t, base),
		"reversed, other modes":              tarOf(t, reversed...),
		"GNU format, ./, uid, mtime, setuid": other.Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			got := shaOf(t, data)
			assert.Equal(t, want, got)
		})
	}
}

func TestSHAChangesWithContentOrName(t *testing.T) {
	want := shaOf(t, tarOf(t, shaVectorFiles...))
	for name, b := range map[string]ent{"content": file("b.txt", "c\n"), "name": file("b2.txt", "b\n")} { // instead of b.txt
		assert.NotEqual(t, want, shaOf(t, tarOf(t, slices.Replace(slices.Clone(shaVectorFiles), 1, 2, b)...)), name)
	}
	assert.NotEqual(t, want, shaOf(t, tarOf(t, append(slices.Clone(shaVectorFiles), file("new", ""))...)), "added")
}

func TestSHARefusals(t *testing.T) {
	good := tarOf(t, shaVectorFiles...)
	for name, data := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-700],
		"duplicate": tarOf(t, append(append([]ent{}, shaVectorFiles...), file("b.txt", "again"))...),
		"not a tar": []byte(strings.Repeat("z", 2000)),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := SHA(context.Background(), bytes.NewReader(data), Limits{})
			require.ErrorIs(t, err, ErrRefused)
			var re *RefusedError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, []codes.Code{codes.BundleMalformed}, refusalCodes(re.Refusals))
			assert.Empty(t, got)
		})
	}
	// An unsafe path does not stop SHA (a test server publishes hostile bundles).
	got := shaOf(t, tarOf(t, file("../x", "x")))
	assert.Len(t, got, 64)
}

// TestVerifyGNUTar verifies what GNU tar writes from a directory holding the good
// bundle ("./" entries, directory entries, ustar/GNU headers), plain and gzip.
func TestVerifyGNUTar(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("GNU tar not on PATH; the ./ handling is also covered by TestVerifyAccepts")
	}
	dir := t.TempDir()
	writeEnts(t, dir, goodEnts(t))
	for _, flags := range []string{"-cf", "-czf"} {
		t.Run(flags, func(t *testing.T) {
			out, err := exec.Command("tar", "-C", dir, flags, "-", ".").Output()
			require.NoError(t, err)
			res, err := Verify(context.Background(), bytes.NewReader(out), Expect{EnvID: testEnv, SHA: goodSHA(t)})
			require.NoError(t, err)
			assert.Equal(t, []string{"app"}, res.Services)
			require.NoError(t, Extract(context.Background(), bytes.NewReader(out), t.TempDir(), res.SHA, Limits{}))
		})
	}
}
