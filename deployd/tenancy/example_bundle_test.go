package tenancy_test

import (
	"archive/tar"
	"bytes"
)

// buildExampleBundle writes a two-file bundle without the deploydtest helpers, which
// need a testing.TB.
func buildExampleBundle() ([]byte, error) {
	files := []struct{ name, body string }{
		{"manifest.json", `{"schema":1,"env_id":"env-dev-01","serial":1,"compose_files":["compose.yaml"],"files":["compose.yaml"],"vars":{},"secrets":{}}`},
		{"compose.yaml", "services:\n  app:\n    image: registry.monky.internal/app:1\n"},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			return nil, err
		}
	}
	err := tw.Close()
	return buf.Bytes(), err
}
