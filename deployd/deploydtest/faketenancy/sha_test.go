package faketenancy_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// agentTestdata is deployd/bundle's testdata: its pinned sha vector and its fixture
// bundles with the sha the agent computes for each.
const agentTestdata = "../../bundle/testdata"

// vectorFiles are files whose names sort differently bytewise, by locale and by entry
// order, with nested directories, spaces and UTF-8: with a manifest.json of
// {"schema":1}, the files of the agent's pinned vector.
var vectorFiles = [][2]string{
	{"b.txt", "b\n"}, {"B.txt", "B\n"}, {"a/z.txt", ""}, {"a-b/c.txt", "dash\n"}, {"a.b", "dot\n"},
	{"_under", "u"}, {"sp ace.txt", "space in name\n"}, {"ünï.txt", "utf-8\n"}, {"deep/er/still/x.bin", "\x00\x01\x02\xff"},
}

// shaSpec is the sample application with vectorFiles besides.
func shaSpec() faketenancy.BundleSpec {
	spec := faketenancy.SampleApp("env-dev-01", 3)
	for _, f := range vectorFiles {
		spec.Files[f[0]] = f[1]
	}
	return spec
}

// tarOf is a tar of regular files (name, content), in order.
func tarOf(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f[0], Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f[1]))}))
		_, err := tw.Write([]byte(f[1]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// TestSHAMatchesCoreutils: the fake's sha of a bundle is what the coreutils pipeline
// of docs/BUNDLE.md computes on the bundle unpacked by GNU tar, and what the agent's
// bundle.SHA computes, for the tar, its gzip and GNU tar's own archive of the files.
func TestSHAMatchesCoreutils(t *testing.T) {
	for _, tool := range []string{"tar", "find", "sort", "xargs", "sha256sum", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH: TestSHAKnownVector still checks the formula", tool)
		}
	}
	spec := shaSpec()
	b, err := faketenancy.BuildBundle(spec)
	require.NoError(t, err)
	spec.Gzip = true
	gz, err := faketenancy.BuildBundle(spec)
	require.NoError(t, err)

	dir := t.TempDir()
	untar := exec.CommandContext(t.Context(), "tar", "-C", dir, "-xf", "-")
	untar.Stdin = bytes.NewReader(b.Data)
	out, err := untar.CombinedOutput()
	require.NoError(t, err, "%s", out)
	pipeline := exec.CommandContext(t.Context(), "sh", "-c", `find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`)
	pipeline.Dir = dir
	out, err = pipeline.Output()
	require.NoError(t, err)
	want := strings.Fields(string(out))[0]
	gnu, err := exec.CommandContext(t.Context(), "tar", "-C", dir, "-cf", "-", ".").Output()
	require.NoError(t, err)

	assert.Equal(t, want, b.SHA, "BuildBundle's sha")
	assert.Equal(t, want, gz.SHA, "BuildBundle's sha, gzip")
	for name, data := range map[string][]byte{"tar": b.Data, "gzip": gz.Data, "GNU tar of the unpacked files": gnu} {
		t.Run(name, func(t *testing.T) {
			got, err := faketenancy.SHA(bytes.NewReader(data))
			require.NoError(t, err)
			assert.Equal(t, want, got, "the fake's SHA")
			agent, err := bundle.SHA(context.Background(), bytes.NewReader(data), bundle.Limits{})
			require.NoError(t, err)
			assert.Equal(t, want, agent, "the agent's bundle.SHA")
		})
	}
}

// TestSHAKnownVector: the fake computes the agent's pinned vector on its files, where
// coreutils is missing too.
func TestSHAKnownVector(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(agentTestdata, "sha_vector.txt"))
	require.NoError(t, err)
	got, err := faketenancy.SHA(bytes.NewReader(tarOf(t, append([][2]string{{"manifest.json", `{"schema":1}`}}, vectorFiles...)...)))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(want)), got)
}

// TestSHAAgreesWithTheAgentOnItsFixtures: on every fixture bundle of deployd/bundle,
// hostile ones included, the fake finds the sha the agent pinned, or no sha where the
// agent finds none. The decompression bombs are left out: the fake has no limits.
func TestSHAAgreesWithTheAgentOnItsFixtures(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join(agentTestdata, "*.golden.json"))
	require.NoError(t, err)
	require.NotEmpty(t, goldens)
	for _, g := range goldens {
		name := strings.TrimSuffix(filepath.Base(g), ".golden.json")
		if strings.HasPrefix(name, "bomb") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(g)
			require.NoError(t, err)
			var golden struct {
				SHA string `json:"sha"`
			}
			require.NoError(t, json.Unmarshal(raw, &golden))
			data, err := os.ReadFile(filepath.Join(agentTestdata, name))
			require.NoError(t, err)
			got, err := faketenancy.SHA(bytes.NewReader(data))
			if golden.SHA == "" {
				assert.Error(t, err, "the agent finds no sha in %s", name)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, golden.SHA, got)
		})
	}
}

// TestSHARefusesWhatHasNoSHA: a tar cut at an entry boundary or inside its
// end-of-archive marker, a corrupt gzip stream and a file that appears twice have no
// sha.
func TestSHARefusesWhatHasNoSHA(t *testing.T) {
	whole := tarOf(t, [2]string{"a", strings.Repeat("x", 512)})
	require.Len(t, whole, 2048, "header, content, two zero blocks")
	_, err := faketenancy.SHA(bytes.NewReader(whole))
	require.NoError(t, err)
	dup := tarOf(t, [2]string{"./a", "a"}, [2]string{"./a", "a"})

	gz, err := faketenancy.BuildBundle(faketenancy.BundleSpec{EnvID: "env-dev-01", Gzip: true})
	require.NoError(t, err)
	corrupt := bytes.Clone(gz.Data)
	corrupt[len(corrupt)-5] ^= 0xff // the CRC-32 of the trailer

	for name, data := range map[string][]byte{
		"empty":               nil,
		"cut after an entry":  whole[:1024],
		"one zero block":      whole[:1536],
		"cut inside an entry": whole[:700],
		"corrupt gzip":        corrupt,
		"twice":               dup,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := faketenancy.SHA(bytes.NewReader(data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "faketenancy: bundle sha")
		})
	}
}
