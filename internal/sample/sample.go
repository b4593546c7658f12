// Package sample builds bundles for the quickstart, the end-to-end tests and the
// benchmarks: a small web application with a bind-mounted config file and a secret,
// and variations of it.
package sample

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
)

// Manifest and SecretRef are the bundle's own types: the sample writes exactly the
// manifest.json that deployd/bundle reads.
type (
	Manifest  = bundle.Manifest
	SecretRef = bundle.SecretRef
)

// Bundle is a bundle under construction: files by path and its manifest. Files lists
// are filled in by Tar.
type Bundle struct {
	Manifest Manifest
	Files    map[string][]byte
}

// App is the sample application: a web service that reads config/app.toml through a
// bind mount and DB_PASSWORD from OpenBao, and a one-shot migration.
func App(envID string, serial int64) *Bundle {
	return &Bundle{
		Manifest: Manifest{
			Schema:       1,
			EnvID:        envID,
			Serial:       serial,
			ComposeFiles: []string{"compose.yaml"},
			Vars:         map[string]string{"LOG_LEVEL": "info"},
			Secrets:      map[string]SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}},
		},
		Files: map[string][]byte{
			"compose.yaml": []byte(`services:
  web:
    image: nginx:1.27
    environment:
      LOG_LEVEL: ${LOG_LEVEL}
      DB_PASSWORD: ${DB_PASSWORD}
    volumes:
      - ./config/app.toml:/etc/app/app.toml:ro
    healthcheck:
      test: ["CMD", "true"]
      interval: 5s
  migrate:
    image: busybox:1.36
    command: ["true"]
    restart: "no"
`),
			"config/app.toml": []byte(fmt.Sprintf("# serial %d\nlisten = \":8080\"\n", serial)),
		},
	}
}

// Services returns a bundle with n services, each bind-mounting its own config file.
func Services(envID string, serial int64, n int) *Bundle {
	var c strings.Builder
	c.WriteString("services:\n")
	files := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("svc%02d", i)
		fmt.Fprintf(&c, "  %s:\n    image: busybox:1.36\n    command: [\"sleep\", \"infinity\"]\n    environment:\n      LOG_LEVEL: ${LOG_LEVEL}\n    volumes:\n      - ./config/%s.conf:/etc/%s.conf:ro\n", name, name, name)
		files["config/"+name+".conf"] = []byte(fmt.Sprintf("name = %q\nserial = %d\n", name, serial))
	}
	files["compose.yaml"] = []byte(c.String())
	return &Bundle{
		Manifest: Manifest{Schema: 1, EnvID: envID, Serial: serial, ComposeFiles: []string{"compose.yaml"},
			Vars: map[string]string{"LOG_LEVEL": "info"}, Secrets: map[string]SecretRef{}},
		Files: files,
	}
}

// Tar returns the bundle as a tar (gzip-compressed when gz), with manifest.json
// first and Files listing every file exactly.
func (b *Bundle) Tar(gz bool) []byte {
	m := b.Manifest
	m.Files = make([]string, 0, len(b.Files))
	for p := range b.Files {
		m.Files = append(m.Files, p)
	}
	sort.Strings(m.Files)
	if m.Vars == nil {
		m.Vars = map[string]string{}
	}
	if m.Secrets == nil {
		m.Secrets = map[string]SecretRef{}
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err) // a Manifest always encodes
	}
	var buf bytes.Buffer
	var w *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = tar.NewWriter(zw)
	} else {
		w = tar.NewWriter(&buf)
	}
	add := func(name string, data []byte) {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(1700000000, 0)}
		if err := w.WriteHeader(hdr); err != nil {
			panic(err)
		}
		if _, err := w.Write(data); err != nil {
			panic(err)
		}
	}
	add("manifest.json", mj)
	for _, p := range m.Files {
		add(p, b.Files[p])
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}
