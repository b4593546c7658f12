package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// ent is one tar entry of a test bundle.
type ent struct {
	name string
	typ  byte // 0 means tar.TypeReg
	body string
	link string
	mode int64
	pax  map[string]string
}

func file(name, body string) ent { return ent{name: name, body: body} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir} }

// tarOf builds a tar from entries; it never fails for the inputs tests give it.
func tarOf(tb testing.TB, ents ...ent) []byte {
	tb.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link,
			ModTime: time.Unix(1700000000, 0), PAXRecords: e.pax, Format: tar.FormatPAX}
		if typ == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: typ, PAXRecords: e.pax}
		}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if typ == tar.TypeChar || typ == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		require.NoError(tb, tw.WriteHeader(h))
		if typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(tb, err)
		}
	}
	require.NoError(tb, tw.Close())
	return b.Bytes()
}

func gzOf(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, err := zw.Write(b)
	require.NoError(tb, err)
	require.NoError(tb, zw.Close())
	return out.Bytes()
}

const testEnv = "env-dev-01"

const goodCompose = `services:
  app:
    image: registry.example/app:1.0
    environment:
      LOG_LEVEL: ${LOG_LEVEL}
      DB_PASSWORD: ${DB_PASSWORD}
    volumes:
      - ./config/app.toml:/etc/app/app.toml:ro
`

func goodManifest() Manifest {
	return Manifest{
		Schema: 1, EnvID: testEnv, Serial: 17,
		ComposeFiles: []string{"compose.yaml"},
		Files:        []string{"compose.yaml", "config/app.toml"},
		Vars:         map[string]string{"LOG_LEVEL": "info"},
		Secrets:      map[string]SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}},
		MinFreeMB:    1,
	}
}

func manifestEnt(tb testing.TB, m Manifest) ent {
	tb.Helper()
	b, err := json.Marshal(m)
	require.NoError(tb, err)
	return file(ManifestName, string(b))
}

// goodEnts are the entries of an accepted bundle, manifest first.
func goodEnts(tb testing.TB) []ent {
	return []ent{
		manifestEnt(tb, goodManifest()),
		file("compose.yaml", goodCompose),
		dir("config/"),
		file("config/app.toml", "level = \"info\"\n"),
	}
}

func goodTar(tb testing.TB) []byte { return tarOf(tb, goodEnts(tb)...) }

// shaOf is SHA of data without limits, which must not fail.
func shaOf(tb testing.TB, data []byte) string {
	tb.Helper()
	s, err := SHA(context.Background(), bytes.NewReader(data), Limits{})
	require.NoError(tb, err)
	return s
}

func expect() Expect { return Expect{EnvID: testEnv} }

// verifyWith verifies data against expect() as edit, if any, changes it.
func verifyWith(data []byte, edit func(*Expect)) (*Result, error) {
	exp := expect()
	if edit != nil {
		edit(&exp)
	}
	return Verify(context.Background(), bytes.NewReader(data), exp)
}

func refusalCodes(rs []Refusal) []codes.Code {
	out := make([]codes.Code, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}
