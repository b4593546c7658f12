package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/testbox/golden"
)

func fixtureExpect() Expect {
	return Expect{EnvID: testEnv, Limits: Limits{MaxTotalSize: 16 << 20}}
}

// fixtures builds every fixture of testdata/. Their bytes are deterministic (fixed
// mtimes, gzip without name or time), so -update only changes what changed.
func fixtures(tb testing.TB) map[string]func() []byte {
	good := goodTar(tb)
	bad := func(e ...ent) []byte { return tarOf(tb, append(goodEnts(tb), e...)...) }
	several := goodManifest()
	several.EnvID = "env-prod-01"
	several.Secrets["API_KEY"] = SecretRef{Path: "../env-prod-02/api", Key: "key"}
	val := func(b []byte) func() []byte { return func() []byte { return b } }
	return map[string]func() []byte{
		"good.tar":           val(good),
		"good.tar.gz":        val(gzOf(tb, good)),
		"empty.tar":          val([]byte{}),
		"not_a_tar.tar":      val([]byte("this is not a tar archive, only text that is long enough to look like one block of a header, or not\n")),
		"no_manifest.tar":    val(tarOf(tb, goodEnts(tb)[1:]...)),
		"traversal.tar":      val(bad(file("../../etc/cron.d/evil", "* * * * * root sh\n"))),
		"absolute.tar":       val(bad(file("/etc/cron.d/evil", "x"))),
		"symlink.tar":        val(bad(ent{name: "config/link", typ: tar.TypeSymlink, link: "/var/run/docker.sock"})),
		"hardlink.tar":       val(bad(ent{name: "passwd", typ: tar.TypeLink, link: "/etc/passwd"})),
		"device.tar":         val(bad(ent{name: "mem", typ: tar.TypeChar})),
		"fifo.tar":           val(bad(ent{name: "pipe", typ: tar.TypeFifo})),
		"duplicate.tar":      val(bad(file("compose.yaml", "services: {}\n"))),
		"unlisted.tar":       val(bad(file("stray.txt", "x"))),
		"truncated.tar":      val(good[:len(good)-1500]),
		"truncated.tar.gz":   val(func() []byte { b := gzOf(tb, good); return b[:len(b)-10] }()),
		"unresolved.tar":     val(composeBundle("services:\n  app:\n    image: app:${TAG}\n")(tb)),
		"privileged.tar":     val(composeBundle("services:\n  app:\n    image: x\n    privileged: true\n")(tb)),
		"secret_path.tar":    val(secretPath("../env-dev-02/db")(tb)),
		"several.tar":        val(tarOf(tb, append([]ent{manifestEnt(tb, several)}, append(goodEnts(tb)[1:], ent{name: "l", typ: tar.TypeSymlink, link: "/"}, file("a//b", "x"))...)...)),
		"bomb.tar.gz":        func() []byte { return zerosTar(tb, goodEnts(tb), []string{"zeros"}, 100<<20) },
		"bomb_many.tar.gz":   func() []byte { return zerosTar(tb, goodEnts(tb)[:1], manyZeroNames(), 1<<20) },
		"bomb_zeros.gz":      func() []byte { return gzipped(tb, func(w io.Writer) { writeZeros(tb, w, 100<<20) }) },
		"manifest_last.tar":  val(tarOf(tb, append(goodEnts(tb)[1:], goodEnts(tb)[0])...)),
		"dot_slash.tar":      val(dotSlash(tb)),
		"bad_manifest.tar":   val(tarOf(tb, append([]ent{file(ManifestName, `{"schema":1,"env_id":"env-dev-01","env_id":"env-prod-01"}`)}, goodEnts(tb)[1:]...)...)),
		"unknown_schema.tar": val(withManifest(tb, func(m *Manifest) { m.Schema = 3 })),
	}
}

func dotSlash(tb testing.TB) []byte {
	ents := goodEnts(tb)
	for i := range ents {
		ents[i].name = "./" + ents[i].name
	}
	return tarOf(tb, append([]ent{dir("./")}, ents...)...)
}

// gzipped is the best-compression gzip of what write writes (deterministic: no name, no time).
func gzipped(tb testing.TB, write func(w io.Writer)) []byte {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	require.NoError(tb, err)
	write(zw)
	require.NoError(tb, zw.Close())
	return out.Bytes()
}

// zerosTar is a gzip tar of ents, then one file of size zeros for each name: bomb.tar.gz
// is the good bundle plus one 100 MiB file, bomb_many.tar.gz 100 files of 1 MiB after the
// manifest.
func zerosTar(tb testing.TB, ents []ent, names []string, size int64) []byte {
	return gzipped(tb, func(w io.Writer) {
		tw := tar.NewWriter(w)
		for _, e := range ents {
			writeEnt(tb, tw, e)
		}
		for _, name := range names {
			require.NoError(tb, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: 0o644, ModTime: time.Unix(1700000000, 0)}))
			writeZeros(tb, tw, size)
		}
		require.NoError(tb, tw.Close())
	})
}

func manyZeroNames() []string {
	names := make([]string, 100)
	for i := range names {
		names[i] = "zeros/" + strings.Repeat("z", 1+i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	return names
}

func writeZeros(tb testing.TB, w io.Writer, n int64) {
	_, err := io.CopyN(w, zeroReader{}, n)
	require.NoError(tb, err)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func writeEnt(tb testing.TB, tw *tar.Writer, e ent) {
	if e.typ == tar.TypeDir {
		require.NoError(tb, tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(1700000000, 0)}))
		return
	}
	require.NoError(tb, tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Size: int64(len(e.body)), Mode: 0o644, ModTime: time.Unix(1700000000, 0)}))
	_, err := tw.Write([]byte(e.body))
	require.NoError(tb, err)
}

// outcome is the recorded outcome of verifying a fixture (its golden file).
type outcome struct {
	SHA      string    `json:"sha"`
	Refusals []Refusal `json:"refusals"`
}

func verifyFixture(data []byte) (outcome, error) {
	res, err := Verify(context.Background(), bytes.NewReader(data), fixtureExpect())
	if res == nil {
		return outcome{}, err
	}
	return outcome{SHA: res.SHA, Refusals: res.Refusals}, nil
}

func TestFixtures(t *testing.T) {
	names := fixtureNames(t)
	if golden.Update() {
		for name, gen := range fixtures(t) {
			require.NoError(t, os.WriteFile(filepath.Join("testdata", name), gen(), 0o644))
			if !slices.Contains(names, name) {
				names = append(names, name) // a new fixture: its golden is written below
			}
		}
	}
	require.GreaterOrEqual(t, len(names), 20)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name))
			require.NoError(t, err)
			got, err := verifyFixture(data)
			require.NoError(t, err)
			b, err := json.MarshalIndent(got, "", "  ")
			require.NoError(t, err)
			golden.AssertJSON(t, name+".golden.json", append(b, '\n'))
		})
	}
}

// fixtureNames lists the bundle fixtures in testdata/ (every file with a golden).
func fixtureNames(tb testing.TB) []string {
	matches, err := filepath.Glob(filepath.Join("testdata", "*.golden.json"))
	require.NoError(tb, err)
	var out []string
	for _, m := range matches {
		out = append(out, strings.TrimSuffix(filepath.Base(m), ".golden.json"))
	}
	return out
}

// TestFixturesAreCurrent fails when the generator and testdata/ disagree.
func TestFixturesAreCurrent(t *testing.T) {
	for name, gen := range fixtures(t) {
		if strings.HasPrefix(name, "bomb") {
			continue // compressing 300 MiB of zeros takes seconds (minutes under -race); -update rebuilds them
		}
		data := gen()
		on, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err, "run go test -run TestFixtures -update")
		assert.True(t, bytes.Equal(data, on), "testdata/%s is stale: run go test -run TestFixtures -update", name)
	}
}

// TestGzipBomb checks that a bomb is refused quickly, without unpacking it and
// without allocating its size.
func TestGzipBomb(t *testing.T) {
	for _, tt := range []struct {
		name, fixture, detail string
	}{
		{"one 100 MiB file", "bomb.tar.gz", "MaxTotalSize"},
		{"100 files of 1 MiB", "bomb_many.tar.gz", "MaxTotalSize"},
		{"100 MiB of zeros, no tar", "bomb_zeros.gz", "padding"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.fixture))
			require.NoError(t, err)
			assert.Less(t, len(data), 1<<20, "the fixture is small")
			cr := &countingReader{r: bytes.NewReader(data)}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			res, err := Verify(context.Background(), cr, Expect{EnvID: testEnv, Limits: Limits{MaxTotalSize: 8 << 20}})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, ErrRefused)
			assert.Equal(t, []codes.Code{codes.BundleMalformed}, refusalCodes(res.Refusals))
			assert.Contains(t, res.Refusals[0].Detail, tt.detail)
			assert.Less(t, elapsed, 2*time.Second)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(24<<20), "allocated far less than the bomb's size")
			t.Logf("refused in %v after %d compressed bytes of %d, %d KiB allocated", elapsed, cr.n, len(data), (after.TotalAlloc-before.TotalAlloc)>>10)
		})
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
