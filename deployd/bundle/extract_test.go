package bundle

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

func TestExtract(t *testing.T) {
	ents := append(goodEnts(t), ent{name: "bin/run.sh", body: "#!/bin/sh\n", mode: 0o4777}, ent{name: "open/", typ: tar.TypeDir, mode: 0o1777})
	m := goodManifest()
	m.Files = append(m.Files, "bin/run.sh")
	ents[0] = manifestEnt(t, m)
	data := tarOf(t, ents...)
	sha := shaOf(t, data)
	old := syscall.Umask(0o077) // Extract sets the modes itself, whatever the umask
	defer syscall.Umask(old)

	for name, stream := range map[string][]byte{"tar": data, "gzip": gzOf(t, data)} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, Extract(context.Background(), bytes.NewReader(stream), dir, sha, Limits{}))
			for _, e := range ents {
				p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(e.name, "/")))
				st, err := os.Lstat(p)
				require.NoError(t, err, e.name)
				if e.typ == tar.TypeDir {
					assert.True(t, st.IsDir())
					assert.Equal(t, fs.ModeDir|DirMode, st.Mode(), e.name)
					continue
				}
				assert.Equal(t, FileMode, st.Mode(), e.name)
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				assert.Equal(t, e.body, string(b))
			}
			st, err := os.Stat(filepath.Join(dir, "bin"))
			require.NoError(t, err)
			assert.Equal(t, fs.ModeDir|DirMode, st.Mode(), "implied parent directory")
			assert.Equal(t, sha, formulaSHA(t, dir), "what was written hashes to the same sha")
		})
	}
}

func TestExtractRefuses(t *testing.T) {
	sha := goodSHA(t)
	for _, tt := range []struct {
		name string
		data []byte
		sha  string
		code codes.Code
	}{
		{"sha mismatch", goodTar(t), strings.Repeat("a", 64), codes.SHAMismatch},
		{"dot-dot", tarOf(t, file("../escape", "x")), sha, codes.ManifestPaths},
		{"absolute", tarOf(t, file("/tmp/escape", "x")), sha, codes.ManifestPaths},
		{"symlink then file through it", tarOf(t, ent{name: "l", typ: tar.TypeSymlink, link: "/tmp"}, file("l/escape", "x")), sha, codes.ManifestPaths},
		{"hardlink", tarOf(t, ent{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}), sha, codes.ManifestPaths},
		{"fifo", tarOf(t, ent{name: "f", typ: tar.TypeFifo}), sha, codes.ManifestPaths},
		{".env", tarOf(t, file(".env", "A=1\n")), sha, codes.ManifestPaths},
		{"labels file", tarOf(t, file(LabelsFileName, "services: {}\n")), sha, codes.ManifestPaths},
		{"under the labels file", tarOf(t, file(LabelsFileName+"/x", "x")), sha, codes.ManifestPaths},
		{"duplicate", tarOf(t, file("a", "1"), file("a", "2")), sha, codes.BundleMalformed},
		{"file then directory inside it", tarOf(t, file("a", "1"), file("a/b", "2")), sha, codes.ManifestPaths},
		{"truncated", goodTar(t)[:700], sha, codes.BundleMalformed},
		{"not a tar", []byte("plain text, not a tar at all, long enough to fill a header block? no."), sha, codes.BundleMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "stage")
			require.NoError(t, os.Mkdir(dir, 0o755))
			err := Extract(context.Background(), bytes.NewReader(tt.data), dir, tt.sha, Limits{})
			require.ErrorIs(t, err, ErrRefused)
			var re *RefusedError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, []codes.Code{tt.code}, refusalCodes(re.Refusals), "%v", re.Refusals)
			// Nothing was written next to the staging directory.
			names, err := os.ReadDir(parent)
			require.NoError(t, err)
			assert.Len(t, names, 1)
			_, err = os.Lstat("/tmp/escape")
			assert.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}

func TestExtractArguments(t *testing.T) {
	data := goodTar(t)
	sha := goodSHA(t)
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	notDir := filepath.Join(full, "x")
	for name, tt := range map[string]struct{ dir, sha string }{
		"no sha":        {t.TempDir(), ""},
		"bad sha":       {t.TempDir(), "xyz"},
		"not empty":     {full, sha},
		"not directory": {notDir, sha},
	} {
		t.Run(name, func(t *testing.T) {
			err := Extract(context.Background(), bytes.NewReader(data), tt.dir, tt.sha, Limits{})
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.NotErrorIs(t, err, ErrRefused)
		})
	}
	err := Extract(context.Background(), bytes.NewReader(data), filepath.Join(full, "missing"), sha, Limits{})
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// removingReader removes the staging directory after the first read, so that
// every later create fails (this works as root too).
type removingReader struct {
	r    *bytes.Reader
	dir  string
	done bool
}

func (r *removingReader) Read(p []byte) (int, error) {
	if !r.done {
		r.done = true
		if err := os.RemoveAll(r.dir); err != nil {
			return 0, err
		}
	}
	return r.r.Read(p)
}

func TestExtractWriteErrorIsNotARefusal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stage")
	require.NoError(t, os.Mkdir(dir, 0o755))
	err := Extract(context.Background(), &removingReader{r: bytes.NewReader(goodTar(t)), dir: dir}, dir, goodSHA(t), Limits{})
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrRefused)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), ManifestName)
}

// TestExtractRefusesWhatVerifyRefusesOnPaths runs Extract over every refusal case
// and fixture: when Verify refuses an entry (a path, an entry type, a duplicate, a
// global header) or the stream, Extract must refuse too.
func TestExtractRefusesWhatVerifyRefusesOnPaths(t *testing.T) {
	inputs := map[string][]byte{}
	for _, tt := range refusalCases() {
		if tt.exp == nil {
			inputs[tt.name] = tt.data(t)
		}
	}
	for _, name := range fixtureNames(t) {
		if strings.HasPrefix(name, "bomb") {
			continue // TestGzipBomb covers them
		}
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		inputs[name] = b
	}
	checked := 0
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			res, verr := Verify(context.Background(), bytes.NewReader(data), expect())
			if verr == nil {
				return
			}
			entryLevel := res.SHA == ""
			for _, r := range res.Refusals {
				if strings.HasPrefix(r.Detail, "entry ") || strings.HasPrefix(r.Detail, "PAX global header") {
					entryLevel = true
				}
			}
			if !entryLevel {
				return
			}
			checked++
			sha := cmp.Or(res.SHA, strings.Repeat("0", 64))
			err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), sha, Limits{MaxTotalSize: 16 << 20})
			require.ErrorIs(t, err, ErrRefused, "Verify refused %v", res.Refusals)
		})
	}
	assert.Greater(t, checked, 30)
}

// TestReadStaged: a release that Extract staged is read back as Verify saw it: the
// same manifest and the same services.
func TestReadStaged(t *testing.T) {
	data := goodTar(t)
	res, err := Verify(context.Background(), bytes.NewReader(data), expect())
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, Extract(context.Background(), bytes.NewReader(data), dir, res.SHA, Limits{}))

	got, err := ReadStaged(context.Background(), dir, Expect{})
	require.NoError(t, err)
	assert.Equal(t, res.Manifest, got.Manifest)
	assert.Equal(t, res.Services, got.Services)
	assert.NotEmpty(t, got.Services)
}

func TestReadStagedSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadStaged(context.Background(), dir, Expect{})
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist, "no manifest")

	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"schema":1}`), 0o644))
	_, err = ReadStaged(context.Background(), dir, Expect{})
	var refused *RefusedError
	require.ErrorAs(t, err, &refused, "a bad manifest is refused as Verify would")
	assert.Equal(t, codes.BundleMalformed, refused.Code())

	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName), []byte(manifestEnt(t, goodManifest()).body), 0o644))
	_, err = ReadStaged(context.Background(), dir, Expect{})
	require.Error(t, err, "the compose file is missing")
	assert.Contains(t, err.Error(), "compose file compose.yaml")
	assert.False(t, errors.As(err, &refused))
}

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(manifestEnt(t, goodManifest()).body))
	require.NoError(t, err)
	assert.Equal(t, goodManifest(), m)
	_, err = ParseManifest([]byte(`{"schema":1,"unknown":true}`))
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
}
