package bundle

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/go-units"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bundleSize is the size of the generated benchmark bundle. The default keeps
// `go test -bench .` quick; the figures in docs/BUNDLE.md use 256MiB and 1GiB.
var bundleSize = flag.String("bundle.size", "32MiB", "size of the generated benchmark bundle (e.g. 256MiB, 1GiB)")

// genBundleSmall writes a bundle of about size bytes to a file in dir: smallBytes in
// small files (1–64 KiB, in 16 directories), the rest in four large files, manifest
// first. Content is pseudo-random, so gzip cannot shrink it. It returns the path.
func genBundleSmall(tb testing.TB, dir string, size, smallBytes int64, gz bool) string {
	tb.Helper()
	src := rand.NewChaCha8([32]byte{1})
	rng := rand.New(src)
	type spec struct {
		name string
		size int64
	}
	var files []spec
	var small int64
	for i := 0; small < smallBytes; i++ {
		n := int64(1<<10 + rng.IntN(63<<10))
		files = append(files, spec{fmt.Sprintf("small/d%02d/f%05d.dat", i%16, i), n})
		small += n
	}
	for i := range 4 {
		files = append(files, spec{fmt.Sprintf("large/blob%d.bin", i), (size - small) / 4})
	}
	compose := "services:\n  app:\n    image: app:1\n"
	m := Manifest{Schema: 1, EnvID: testEnv, Serial: 1, ComposeFiles: []string{"compose.yaml"}, Files: []string{"compose.yaml"}}
	for _, f := range files {
		m.Files = append(m.Files, f.name)
	}
	mj, err := json.Marshal(m)
	require.NoError(tb, err)

	p := filepath.Join(dir, "bench.tar")
	if gz {
		p += ".gz"
	}
	out, err := os.Create(p)
	require.NoError(tb, err)
	bw := bufio.NewWriterSize(out, 1<<20)
	var w io.Writer = bw
	var zw *gzip.Writer
	if gz {
		zw, err = gzip.NewWriterLevel(bw, gzip.BestSpeed)
		require.NoError(tb, err)
		w = zw
	}
	tw := tar.NewWriter(w)
	put := func(name string, size int64, r io.Reader) {
		require.NoError(tb, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: 0o644}))
		_, err := io.CopyN(tw, r, size)
		require.NoError(tb, err)
	}
	put(ManifestName, int64(len(mj)), strings.NewReader(string(mj)))
	put("compose.yaml", int64(len(compose)), strings.NewReader(compose))
	for _, f := range files {
		put(f.name, f.size, src)
	}
	require.NoError(tb, tw.Close())
	if zw != nil {
		require.NoError(tb, zw.Close())
	}
	require.NoError(tb, bw.Flush())
	require.NoError(tb, out.Close())
	return p
}

func benchBundle(b *testing.B, gz bool) (string, int64) {
	size, err := units.RAMInBytes(*bundleSize)
	require.NoError(b, err)
	p := genBundleSmall(b, b.TempDir(), size, size/4, gz) // a quarter in small files
	st, err := os.Stat(p)
	require.NoError(b, err)
	return p, st.Size()
}

func benchLimits() Limits {
	return Limits{MaxEntries: 1 << 20, MaxFileSize: 1 << 40, MaxTotalSize: 1 << 40}
}

// cost is the wall and CPU time (user+sys of the whole process) of one run. CPU
// time is what the ratio uses: other load on a shared machine stretches wall time
// but not the CPU time a run needs.
type cost struct{ wall, cpu time.Duration }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measure(run func()) cost {
	c0, w0 := cpuTime(), time.Now()
	run()
	return cost{wall: time.Since(w0), cpu: cpuTime() - c0}
}

// floor hashes the file's bytes with crypto/sha256 alone, the way Verify reads.
func floor(tb testing.TB, p string) cost {
	f, err := os.Open(p)
	require.NoError(tb, err)
	defer func() { _ = f.Close() }()
	h := sha256.New()
	return measure(func() {
		_, err = io.CopyBuffer(h, f, make([]byte, copyBufSize))
		require.NoError(tb, err)
	})
}

func verifyOnce(tb testing.TB, p string) cost {
	f, err := os.Open(p)
	require.NoError(tb, err)
	defer func() { _ = f.Close() }()
	var res *Result
	c := measure(func() {
		res, err = Verify(context.Background(), f, Expect{EnvID: testEnv, Limits: benchLimits()})
	})
	require.NoError(tb, err)
	require.Len(tb, res.SHA, 64)
	return c
}

func benchVerify(b *testing.B, gz bool) {
	p, n := benchBundle(b, gz)
	floor(b, p) // warm the page cache
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		verifyOnce(b, p)
	}
	b.StopTimer()
	// The ratio to the floor is measured apart, interleaved, best of five, in CPU
	// time (and wall time for reference), so that other load hits both sides alike.
	const big = time.Duration(1 << 62)
	bestV, bestF := cost{big, big}, cost{big, big}
	for range 5 {
		f, v := floor(b, p), verifyOnce(b, p)
		bestF = cost{min(bestF.wall, f.wall), min(bestF.cpu, f.cpu)}
		bestV = cost{min(bestV.wall, v.wall), min(bestV.cpu, v.cpu)}
	}
	b.ReportMetric(float64(bestV.cpu)/float64(bestF.cpu), "x-floor-cpu")
	b.ReportMetric(float64(bestV.wall)/float64(bestF.wall), "x-floor-wall")
	b.ReportMetric(float64(vmHWM())/(1<<20), "VmHWM-MiB")
}

// BenchmarkVerify verifies a plain tar bundle of -bundle.size bytes and reports
// its cost as a multiple of BenchmarkSHA256Floor's (x-floor-cpu; target ≤ 1.3)
// and the process's peak resident memory (VmHWM-MiB).
func BenchmarkVerify(b *testing.B) { benchVerify(b, false) }

// BenchmarkVerifyGzip is BenchmarkVerify over the gzip-compressed bundle; gzip
// decompression is extra, so its ratio is not held to the target.
func BenchmarkVerifyGzip(b *testing.B) { benchVerify(b, true) }

// BenchmarkSHA256Floor hashes the same bytes with crypto/sha256 alone.
func BenchmarkSHA256Floor(b *testing.B) {
	p, n := benchBundle(b, false)
	floor(b, p)
	b.SetBytes(n)
	b.ResetTimer()
	for b.Loop() {
		floor(b, p)
	}
}

func BenchmarkSHA(b *testing.B) {
	p, n := benchBundle(b, false)
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Open(p)
		require.NoError(b, err)
		_, err = SHA(context.Background(), f, benchLimits())
		_ = f.Close()
		require.NoError(b, err)
	}
}

// vmHWM returns the process's peak resident set size in bytes, or 0.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// TestMemoryFlat verifies an 8 MiB and a 64 MiB bundle with the same files (the
// large ones grow) and checks that what Verify allocates does not grow with the
// bytes.
func TestMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 72 MiB of bundles")
	}
	alloc := func(size int64) uint64 {
		p := genBundleSmall(t, t.TempDir(), size, 1<<20, false)
		f, err := os.Open(p)
		require.NoError(t, err)
		defer func() { _ = f.Close() }()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err = Verify(context.Background(), f, Expect{EnvID: testEnv, Limits: benchLimits()})
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		return after.TotalAlloc - before.TotalAlloc
	}
	alloc(2 << 20) // compose-go compiles its schema on first use
	small, big := alloc(8<<20), alloc(64<<20)
	t.Logf("allocated %d KiB for 8 MiB, %d KiB for 64 MiB", small>>10, big>>10)
	assert.Less(t, big, uint64(4<<20), "64 MiB bundle: allocations stay small")
	assert.Less(t, big, small+(256<<10), "allocations do not grow with the bytes")
}
