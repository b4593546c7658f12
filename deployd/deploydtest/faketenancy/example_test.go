package faketenancy_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// ExampleBuildBundle builds the sample application's bundle, changes one of its
// files, and hashes the tar with the fake's own SHA: the sha does not depend on the
// compression.
func ExampleBuildBundle() {
	spec := faketenancy.SampleApp("env-dev-01", 7)
	spec.Files["config/app.toml"] = "listen = \":9090\"\n"
	b, err := faketenancy.BuildBundle(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	var m struct {
		EnvID  string   `json:"env_id"`
		Serial int64    `json:"serial"`
		Files  []string `json:"files"`
	}
	_ = json.Unmarshal(b.Manifest, &m)
	fmt.Println("manifest:", m.EnvID, m.Serial, m.Files)
	spec.Gzip = true
	gz, err := faketenancy.BuildBundle(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	sha, err := faketenancy.SHA(bytes.NewReader(gz.Data))
	fmt.Println("gzip:", gz.Data[0] == 0x1f, "same sha:", sha == b.SHA, err)

	_, err = faketenancy.SHA(bytes.NewReader(b.Data[:len(b.Data)-1024]))
	fmt.Println("without its end-of-archive marker:", err)
	// Output:
	// manifest: env-dev-01 7 [compose.yaml config/app.toml]
	// gzip: true same sha: true <nil>
	// without its end-of-archive marker: faketenancy: bundle sha: not a complete tar: no end-of-archive marker
}
