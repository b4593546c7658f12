package faketenancy

import (
	"fmt"
	"strings"
)

// SampleApp is the spec of the sample application used by the quickstart and the
// end-to-end tests: a web service that reads config/app.toml through a bind mount,
// LOG_LEVEL from the manifest's vars and DB_PASSWORD from OpenBao (secret "db", key
// "password"), and a one-shot migration. The spec is the caller's to change.
func SampleApp(envID string, serial int64) BundleSpec {
	return BundleSpec{
		EnvID:   envID,
		Serial:  serial,
		Vars:    map[string]string{"LOG_LEVEL": "info"},
		Secrets: map[string]SecretRef{"DB_PASSWORD": {Path: "db", Key: "password"}},
		Files: map[string]string{
			"compose.yaml": `services:
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
`,
			"config/app.toml": fmt.Sprintf("# serial %d\nlisten = \":8080\"\n", serial),
		},
	}
}

// SampleServices is the spec of a bundle with n services (svc00, svc01, …), each
// bind-mounting its own config file and reading LOG_LEVEL from the manifest's vars;
// the benchmarks apply it.
func SampleServices(envID string, serial int64, n int) BundleSpec {
	var c strings.Builder
	c.WriteString("services:\n")
	files := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("svc%02d", i)
		fmt.Fprintf(&c, "  %s:\n    image: busybox:1.36\n    command: [\"sleep\", \"infinity\"]\n    environment:\n      LOG_LEVEL: ${LOG_LEVEL}\n    volumes:\n      - ./config/%s.conf:/etc/%s.conf:ro\n", name, name, name)
		files["config/"+name+".conf"] = fmt.Sprintf("name = %q\nserial = %d\n", name, serial)
	}
	files["compose.yaml"] = c.String()
	return BundleSpec{EnvID: envID, Serial: serial, Vars: map[string]string{"LOG_LEVEL": "info"}, Files: files}
}
