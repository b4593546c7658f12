package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// packFiles are the files of the directory the Pack tests pack, manifest aside:
// names whose bytewise order differs from the order a directory lists them in.
func packFiles() map[string]string {
	return map[string]string{
		"compose.yaml":        goodCompose,
		"config/app.toml":     "level = \"info\"\n",
		"config-b.txt":        "dash sorts before slash\n",
		"B.txt":               "capital first\n",
		"deep/er/still/x.bin": "\x00\x01\x02\xff",
		"ünï.txt":             "utf-8 name\n",
		"empty.txt":           "",
	}
}

func packManifest() Manifest {
	m := goodManifest()
	m.Files = slices.Sorted(maps.Keys(packFiles()))
	return m
}

// writeTree writes files under a new directory, with the given mode and mtime.
func writeTree(t *testing.T, files map[string]string, mode os.FileMode, mtime time.Time) string {
	t.Helper()
	dir := t.TempDir()
	names := slices.Sorted(maps.Keys(files))
	if mode&0o100 != 0 { // a second order of creation for the second tree
		slices.Reverse(names)
	}
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(files[name]), mode))
		require.NoError(t, os.Chmod(p, mode))
		require.NoError(t, os.Chtimes(p, mtime, mtime))
	}
	return dir
}

// packDirTree writes packFiles and their manifest.json (encoded as Pack encodes it).
func packDirTree(t *testing.T, mode os.FileMode, mtime time.Time) string {
	t.Helper()
	files := packFiles()
	files[ManifestName] = string(manifestJSON(t, packManifest()))
	return writeTree(t, files, mode, mtime)
}

func manifestJSON(t *testing.T, m Manifest) []byte {
	t.Helper()
	var b bytes.Buffer
	_, err := Pack(context.Background(), &b, writeTree(t, packFiles(), 0o644, time.Now()), m, PackOptions{})
	require.NoError(t, err)
	tr := tar.NewReader(&b)
	h, err := tr.Next()
	require.NoError(t, err)
	require.Equal(t, ManifestName, h.Name)
	data, err := io.ReadAll(tr)
	require.NoError(t, err)
	return data
}

func packBytes(t *testing.T, dir string, opt PackOptions) ([]byte, *PackResult) {
	t.Helper()
	var b bytes.Buffer
	res, err := PackDir(context.Background(), &b, dir, opt)
	require.NoError(t, err)
	return b.Bytes(), res
}

// TestPackReproducible: the same files give the same bytes and the same sha, whatever
// their modes, times and order of creation, plain and gzip; the sha is SHA's of the
// bytes and the formula's of the directory.
func TestPackReproducible(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%t", gz), func(t *testing.T) {
			a := packDirTree(t, 0o644, time.Unix(1700000000, 0))
			b := packDirTree(t, 0o755, time.Now())
			opt := PackOptions{Gzip: gz}
			da, ra := packBytes(t, a, opt)
			db, rb := packBytes(t, b, opt)
			assert.Equal(t, da, db, "the same directory twice gives the same bytes")
			assert.Equal(t, ra.SHA, rb.SHA)
			again, _ := packBytes(t, a, opt)
			assert.Equal(t, da, again)

			sha := shaOf(t, da)
			assert.Equal(t, sha, ra.SHA, "the sha by construction is SHA's of the bytes")
			assert.Equal(t, formulaSHA(t, a), ra.SHA, "and the formula's, computed here from the directory")
			assert.Equal(t, 1+len(packFiles()), ra.Files)
			assert.Equal(t, int64(len(packManifest().Files)), int64(len(ra.Manifest.Files)))
			if gz {
				assert.Equal(t, []byte{0x1f, 0x8b}, da[:2])
				zr, err := gzip.NewReader(bytes.NewReader(da))
				require.NoError(t, err)
				assert.Empty(t, zr.Name)
				assert.True(t, zr.ModTime.IsZero(), "gzip mtime 0: %v", zr.ModTime)
			}
		})
	}
}

// formulaSHA computes the sha of docs/BUNDLE.md from a directory, independently of
// the package: every regular file, sorted bytewise, "<sha256>  <path>\n".
func formulaSHA(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(dir, p)
			require.NoError(t, err)
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	}))
	slices.Sort(names)
	var listing strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		listing.WriteString(hex.EncodeToString(sum[:]) + "  " + n + "\n")
	}
	sum := sha256.Sum256([]byte(listing.String()))
	return hex.EncodeToString(sum[:])
}

// TestPackMatchesCoreutils runs the coreutils line of docs/BUNDLE.md in the directory.
func TestPackMatchesCoreutils(t *testing.T) {
	dir := packDirTree(t, 0o644, time.Now())
	_, res := packBytes(t, dir, PackOptions{Gzip: true})
	assert.Equal(t, coreutilsSHA(t, dir), res.SHA)
}

// TestPackLayout: manifest first, then sorted entries, a directory before its
// contents, fixed metadata.
func TestPackLayout(t *testing.T) {
	data, _ := packBytes(t, packDirTree(t, 0o750, time.Now()), PackOptions{})
	tr := tar.NewReader(bytes.NewReader(data))
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Equal(t, time.Unix(0, 0), h.ModTime, h.Name)
		assert.Zero(t, h.Uid, h.Name)
		assert.Zero(t, h.Gid, h.Name)
		assert.Empty(t, h.Uname, h.Name)
		assert.Empty(t, h.Gname, h.Name)
		assert.True(t, h.AccessTime.IsZero() && h.ChangeTime.IsZero(), h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			assert.Equal(t, int64(0o755), h.Mode, h.Name)
		case tar.TypeReg:
			assert.Equal(t, int64(0o644), h.Mode, h.Name)
		default:
			t.Errorf("%s: type %c", h.Name, h.Typeflag)
		}
	}
	assert.Equal(t, []string{"manifest.json", "B.txt", "compose.yaml", "config-b.txt", "config/", "config/app.toml",
		"deep/", "deep/er/", "deep/er/still/", "deep/er/still/x.bin", "empty.txt", "ünï.txt"}, names)
}

// TestPackVerifies: what Pack writes, Verify accepts, with the same sha and counts.
func TestPackVerifies(t *testing.T) {
	var b bytes.Buffer
	res, err := Pack(context.Background(), &b, writeTree(t, packFiles(), 0o600, time.Now()), Manifest{
		Schema: 1, EnvID: testEnv, Serial: 17, ComposeFiles: []string{"compose.yaml"},
		Vars: map[string]string{"LOG_LEVEL": "info"}, Secrets: map[string]SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}},
	}, PackOptions{Gzip: true})
	require.NoError(t, err)
	assert.Equal(t, packManifest().Files, res.Manifest.Files, "files nil: every file of the directory, sorted")
	v, err := Verify(context.Background(), bytes.NewReader(b.Bytes()), Expect{EnvID: testEnv, SHA: res.SHA})
	require.NoError(t, err)
	assert.Equal(t, res.SHA, v.SHA)
	assert.Equal(t, res.Files, v.Files)
	assert.Equal(t, res.Size, v.Size)
	assert.Equal(t, res.Manifest, v.Manifest)
	assert.Equal(t, Statement{SHA: res.SHA, EnvID: testEnv, Serial: 17}, res.Statement())
}

// TestPackRefusals: what a box would refuse is refused before anything is written,
// every refusal at once, naming the path.
func TestPackRefusals(t *testing.T) {
	paths, malformed := []codes.Code{codes.ManifestPaths}, []codes.Code{codes.BundleMalformed}
	put := func(name, body string) func(*testing.T, string) { // a file at name (slash-separated), its directories first
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		}
	}
	symlink := func(target, name string) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))))
		}
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		m       func(m *Manifest)
		opt     PackOptions
		refused []codes.Code
		detail  string
	}{
		{name: "symlink", setup: symlink("/etc/passwd", "config/passwd"), refused: paths, detail: `"config/passwd" is a symlink; a bundle holds only regular files and directories`},
		{name: "symlink to a directory is not followed", setup: symlink("/etc", "etc"), refused: paths, detail: `"etc" is a symlink`},
		{name: "fifo", setup: func(t *testing.T, dir string) {
			require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
		}, refused: paths, detail: `"pipe" is a fifo`},
		{name: "socket", setup: func(t *testing.T, dir string) {
			l, err := net.Listen("unix", filepath.Join(dir, "sock"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
		}, refused: paths, detail: `"sock" is a socket`},
		{name: "root .env", setup: put(".env", "X=1\n"), refused: paths, detail: `".env": path is reserved`},
		{name: "root labels file", setup: put(LabelsFileName, "services: {}\n"), refused: paths, detail: `".deployd-labels.yaml": path is reserved`},
		{name: "backslash in a name", setup: put(`a\b`, "x"), refused: paths, detail: `"a\\b": path contains a backslash`},
		{name: "control character in a directory name", setup: put("a\nb/x", "x"), refused: paths, detail: `"a\nb": path contains a control character`},
		{name: "file not in files", setup: put("stray", "x"), refused: paths, detail: `"stray" is in the directory but not in files`},
		{name: "a manifest.json of its own", setup: put(ManifestName, manifestEnt(t, goodManifest()).body), refused: paths,
			detail: `MANIFEST_PATHS: "manifest.json" is in the directory`},
		{name: "listed file missing", m: func(m *Manifest) { m.Files = append(m.Files, "gone.txt") },
			refused: paths, detail: `"gone.txt" is listed in files but not in the directory`},
		{name: "invalid manifest", m: func(m *Manifest) { m.EnvID = "prod" }, refused: malformed, detail: `env_id "prod" does not match`},
		{name: "secret path", m: func(m *Manifest) { m.Secrets["DB_PASSWORD"] = SecretRef{Path: "../x", Key: "k"} },
			refused: []codes.Code{codes.SecretPath}, detail: "DB_PASSWORD"},
		{name: "MaxFileSize", opt: PackOptions{Limits: Limits{MaxFileSize: 10}},
			refused: malformed, detail: fmt.Sprintf(`"compose.yaml" is %d bytes, over the limit of 10 (MaxFileSize)`, len(goodCompose))},
		{name: "MaxComposeFileSize", opt: PackOptions{Limits: Limits{MaxComposeFileSize: 10}},
			refused: malformed, detail: fmt.Sprintf(`compose file "compose.yaml" is %d bytes, over the limit of 10 (MaxComposeFileSize)`, len(goodCompose))},
		{name: "MaxTotalSize", opt: PackOptions{Limits: Limits{MaxTotalSize: 100}}, refused: malformed, detail: "(MaxTotalSize)"},
		{name: "MaxEntries", opt: PackOptions{Limits: Limits{MaxEntries: 3}}, // manifest, 2 files, config/
			refused: malformed, detail: "the bundle would have 4 entries, over the limit of 3 (MaxEntries)"},
		{name: "MaxManifestSize", opt: PackOptions{Limits: Limits{MaxManifestSize: 10}}, refused: malformed, detail: "(MaxManifestSize)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"compose.yaml": goodCompose, "config/app.toml": "x\n"}
			dir := writeTree(t, files, 0o644, time.Now())
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			m := goodManifest()
			if tt.m != nil {
				tt.m(&m)
			}
			var out bytes.Buffer
			res, err := Pack(context.Background(), &out, dir, m, tt.opt)
			require.Error(t, err)
			assert.Nil(t, res)
			assert.Zero(t, out.Len(), "nothing is written before the checks pass")
			var re *RefusedError
			require.ErrorAs(t, err, &re)
			require.ErrorIs(t, err, ErrRefused)
			assert.Equal(t, tt.refused, refusalCodes(re.Refusals), "%v", re.Refusals)
			assert.Contains(t, err.Error(), tt.detail)
		})
	}
}

func TestPackDirManifest(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		_, err := PackDir(context.Background(), io.Discard, writeTree(t, packFiles(), 0o644, time.Now()), PackOptions{})
		var re *RefusedError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, "BUNDLE_MALFORMED: the directory has no manifest.json at its root", re.Refusals[0].String())
	})
	t.Run("packed byte for byte", func(t *testing.T) {
		// Compact, no final newline: not what Pack would encode.
		list, err := json.Marshal(packManifest().Files)
		require.NoError(t, err)
		files := packFiles()
		files[ManifestName] = `{"schema":1,"env_id":"env-dev-01","serial":3,"compose_files":["compose.yaml"],"files":` + string(list) + "}"
		dir := writeTree(t, files, 0o644, time.Now())
		data, res := packBytes(t, dir, PackOptions{})
		tr := tar.NewReader(bytes.NewReader(data))
		_, err = tr.Next()
		require.NoError(t, err)
		got, err := io.ReadAll(tr)
		require.NoError(t, err)
		assert.Equal(t, files[ManifestName], string(got))
		assert.Equal(t, formulaSHA(t, dir), res.SHA)
		assert.Equal(t, int64(3), res.Manifest.Serial)
	})
	t.Run("strict like Verify", func(t *testing.T) {
		files := packFiles()
		files[ManifestName] = `{"schema":1,"schema":1}`
		_, err := PackDir(context.Background(), io.Discard, writeTree(t, files, 0o644, time.Now()), PackOptions{})
		require.ErrorIs(t, err, ErrRefused)
		assert.Contains(t, err.Error(), `BUNDLE_MALFORMED: manifest.json: field "schema" appears twice`)
	})
	t.Run("manifest.json as a symlink", func(t *testing.T) {
		dir := writeTree(t, packFiles(), 0o644, time.Now())
		other := filepath.Join(t.TempDir(), "m.json")
		require.NoError(t, os.WriteFile(other, manifestJSON(t, packManifest()), 0o644))
		require.NoError(t, os.Symlink(other, filepath.Join(dir, ManifestName)))
		_, err := PackDir(context.Background(), io.Discard, dir, PackOptions{})
		require.ErrorIs(t, err, ErrRefused)
		assert.Contains(t, err.Error(), `"manifest.json" is a symlink`)
	})
}

func TestPackErrors(t *testing.T) {
	t.Run("no directory", func(t *testing.T) {
		_, err := PackDir(context.Background(), io.Discard, filepath.Join(t.TempDir(), "nope"), PackOptions{})
		require.ErrorIs(t, err, os.ErrNotExist)
		assert.NotErrorIs(t, err, ErrRefused)
	})
	t.Run("failing writer", func(t *testing.T) {
		_, err := PackDir(context.Background(), failingWriter{}, packDirTree(t, 0o644, time.Now()), PackOptions{})
		require.ErrorIs(t, err, errBroken)
		assert.NotErrorIs(t, err, ErrRefused)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := PackDir(ctx, io.Discard, packDirTree(t, 0o644, time.Now()), PackOptions{})
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("not a directory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(f, nil, 0o644))
		_, err := PackDir(context.Background(), io.Discard, f, PackOptions{})
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrRefused)
	})
}

// TestPackFileChanged: a file that changes between the listing and its copy is an
// error naming it, never a bundle whose header and content disagree.
func TestPackFileChanged(t *testing.T) {
	tests := map[string]struct {
		change func(t *testing.T, p string)
		want   string
	}{
		"grew": {func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("more")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "config/app.toml grew while packing"},
		"shrank": {func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 1)) }, "config/app.toml shrank while packing"},
		"replaced": {func(t *testing.T, p string) {
			// Written beside it and renamed over it: another inode, the same size.
			require.NoError(t, os.WriteFile(p+".new", []byte("level = \"INFO\"\n"), 0o644))
			require.NoError(t, os.Rename(p+".new", p))
		}, "config/app.toml was replaced while packing"},
		"replaced by a symlink": {func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink("/etc/passwd", p))
		}, "config/app.toml"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{"compose.yaml": goodCompose, "config/app.toml": "level = \"info\"\n"}, 0o644, time.Now())
			p, err := newPacker(context.Background(), dir, PackOptions{})
			require.NoError(t, err)
			defer p.close()
			tt.change(t, filepath.Join(dir, "config", "app.toml"))
			_, err = p.pack(io.Discard, []byte(manifestEnt(t, goodManifest()).body))
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrRefused)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errBroken }

// TestPackStreams packs a 64 MiB file and checks that Pack allocated a small fraction
// of it: the bundle never is in memory.
func TestPackStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	dir := writeTree(t, map[string]string{"compose.yaml": goodCompose}, 0o644, time.Now())
	big, err := os.Create(filepath.Join(dir, "big.bin"))
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for range 64 {
		_, err := big.Write(chunk)
		require.NoError(t, err)
	}
	require.NoError(t, big.Close())
	m := goodManifest()
	m.Files = []string{"big.bin", "compose.yaml"}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := Pack(context.Background(), io.Discard, dir, m, PackOptions{Gzip: true})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Files)
	assert.Greater(t, res.Size, int64(64<<20))
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(8<<20), "Pack of a 64 MiB file allocated %d bytes", allocated)
}
