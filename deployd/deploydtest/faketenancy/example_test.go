package faketenancy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

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

// ExampleServer_LastLive posts a check-in whose live object says a service is
// restarting, and reads it back as the fake kept it.
func ExampleServer_LastLive() {
	auth := faketenancy.NewMemoryAuthority()
	s := faketenancy.New(faketenancy.Options{Authority: auth})
	defer s.Close()
	body := `{"env_id":"env-dev-01","agent_version":"0.1.0","current_sha":"","current_serial":0,
	 "last_result":"","last_code":"","host":{"hostname":"box-1","docker_version":"27.3.1","free_mb":2048},
	 "live":{"observed_at":"2026-03-04T10:22:33.5Z","healthy":false,
	  "services":[{"name":"app","state":"restarting","health":"","exit_code":137,"restarts":4}]}}`
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/agent/checkin", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+auth.Token("env-dev-01"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	live, ok := s.LastLive("env-dev-01")
	fmt.Println(resp.StatusCode, ok, *live.Healthy, live.ObservedAt.Format(time.RFC3339Nano))
	for _, sv := range live.Services {
		fmt.Println(sv.Name, sv.State, sv.ExitCode, sv.Restarts)
	}
	// Output:
	// 200 true false 2026-03-04T10:22:33.5Z
	// app restarting 137 4
}
