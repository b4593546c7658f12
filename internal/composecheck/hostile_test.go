package composecheck

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd/codes"
)

// composeInput is the Input of one compose file (compose.yaml) plus extra bundle files.
func composeInput(compose string, extra map[string]string) Input {
	in := Input{Files: map[string][]byte{"compose.yaml": []byte(compose)}, ComposeFiles: []string{"compose.yaml"},
		BundleFiles: []string{"compose.yaml"}, Vars: map[string]string{}}
	for p, c := range extra {
		in.Files[p] = []byte(c)
		in.BundleFiles = append(in.BundleFiles, p)
	}
	slices.Sort(in.BundleFiles)
	return in
}

// checkOne runs Check on composeInput(compose, extra).
func checkOne(compose string, extra map[string]string) Result {
	return Check(context.Background(), composeInput(compose, extra))
}

func privilegedDetails(r Result) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Code == codes.Privileged {
			out = append(out, f.Detail)
		}
	}
	return out
}

// A build reaches the host as much as a container does: docker compose up builds a
// missing image, with BuildKit, as root, on the box. Each case gives a service host
// access through its build section only.
func TestCheckBuildReachesTheHost(t *testing.T) {
	cases := map[string]string{
		"privileged":          "privileged: true",
		"entitlements":        "entitlements: [security.insecure]",
		"network host":        "network: host",
		"additional context":  "additional_contexts:\n          hostroot: /",
		"additional escape":   "additional_contexts:\n          up: ../..",
		"ssh key of the host": "ssh:\n          - default=/root/.ssh/id_ed25519",
		"ssh agent":           "ssh: [default]",
		"secret file":         "secrets: [token]",
		"cache_to local":      "cache_to: [\"type=local,dest=/etc/cron.d\"]",
		"cache_from local":    "cache_from: [\"type=local,src=/var/lib/monky-deployd\"]",
		"dockerfile outside":  "dockerfile: /var/lib/monky-deployd/bao.token",
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			compose := "services:\n  app:\n    image: x\n    build:\n        context: .\n        " + build +
				"\nsecrets:\n  token:\n    file: /var/lib/monky-deployd/bao.token\n"
			r := checkOne(compose, nil)
			d := privilegedDetails(r)
			assert.NotEmpty(t, d, "findings: %v", r.Findings)
			for _, s := range d {
				assert.True(t, strings.HasPrefix(s, "service app: build"), s)
			}
		})
	}
}

// A build inside the release, with its secret and ssh key inside the release too,
// stays allowed.
func TestCheckBuildInsideTheRelease(t *testing.T) {
	compose := `services:
  app:
    image: x
    build:
      context: ./app
      dockerfile: Dockerfile
      additional_contexts:
        shared: ./shared
        base: docker-image://alpine:3
      ssh:
        - deploy=./keys/deploy
      secrets: [npmrc]
      cache_from: [registry.example/app:cache, "type=registry,ref=registry.example/app:cache"]
      network: default
secrets:
  npmrc:
    file: ./config/npmrc
`
	r := checkOne(compose, nil)
	assert.Empty(t, privilegedDetails(r), "findings: %v", r.Findings)
}

// A seccomp profile given as a file replaces docker's default profile with one the
// agent cannot judge: {"defaultAction":"SCMP_ACT_ALLOW"} is unconfined by another
// name. An SELinux type label (spc_t, "super privileged container") is label=disable
// by another name.
func TestCheckSecurityOptProfiles(t *testing.T) {
	refused := []string{
		"seccomp=./seccomp.json", "seccomp:./seccomp.json", "seccomp=/etc/allow-all.json",
		"label=type:spc_t", "label:type:spc_t", "label=type:unconfined_t",
	}
	allowed := []string{"no-new-privileges", "no-new-privileges:true", "seccomp=builtin", "apparmor=docker-default", "label=level:s0:c100,c200", "label=type:container_t"}
	for _, opt := range append(refused, allowed...) {
		t.Run(opt, func(t *testing.T) {
			compose := "services:\n  app:\n    image: x\n    security_opt: [\"" + opt + "\"]\n"
			r := checkOne(compose, map[string]string{"seccomp.json": `{"defaultAction":"SCMP_ACT_ALLOW"}`})
			assert.Equal(t, slices.Contains(refused, opt), len(privilegedDetails(r)) > 0, "findings: %v", r.Findings)
		})
	}
}

// A secret's value is unknown at verify time: the load sees a placeholder, and the
// value that OpenBao returns at apply time decides the setting. A secret may feed
// environment values, labels and commands, but not a setting that the privilege scan
// judges: with HOST_DIR="/" a bind mount inside the release becomes the host's root.
func TestCheckSecretDecidesAPrivilege(t *testing.T) {
	cases := map[string]string{
		"bind source long":   "volumes:\n      - type: bind\n        source: ./${S}\n        target: /data",
		"bind source plain":  "volumes:\n      - type: bind\n        source: ${S}\n        target: /data",
		"network_mode":       "network_mode: ${S}",
		"pid":                "pid: ${S}",
		"ipc":                "ipc: ${S}",
		"userns_mode":        "userns_mode: ${S}",
		"cgroup":             "cgroup: ${S}",
		"security_opt":       "security_opt: [\"${S}\"]",
		"volumes_from":       "volumes_from: [\"container:${S}\"]",
		"build context":      "build:\n      context: ./${S}",
		"build addl context": "build:\n      context: .\n      additional_contexts:\n        x: ./${S}",
		"secret file":        "secrets: [f]",
		"volume device":      "volumes: [\"dev:/dev-data\"]",
	}
	for name, svc := range cases {
		t.Run(name, func(t *testing.T) {
			compose := "services:\n  app:\n    image: x\n    " + svc +
				"\nsecrets:\n  f:\n    file: ./${S}\nvolumes:\n  dev:\n    driver_opts:\n      type: none\n      o: bind\n      device: ./${S}\n"
			r := checkWithSecretS(compose)
			assert.False(t, r.OK(), "a secret decides a privilege-relevant setting and nothing is refused")
			for _, f := range r.Findings {
				assert.NotContains(t, f.Detail, secretPlaceholder)
			}
		})
	}
	// Secrets in environment values, labels and commands are what they are for.
	compose := "services:\n  app:\n    image: x\n    environment:\n      DB: ${S}\n    labels:\n      a: ${S}\n    command: [\"--pw\", \"${S}\"]\n"
	r := checkWithSecretS(compose)
	assert.True(t, r.OK(), "%v", r.Findings)
}

// checkWithSecretS checks compose (compose.yaml alone) whose S is a secret's name.
func checkWithSecretS(compose string) Result {
	in := composeInput(compose, nil)
	in.SecretNames = []string{"S"}
	return Check(context.Background(), in)
}

// A config or secret whose file is the release's .env hands every secret of the
// environment to the container, as a bind mount of .env does (refused).
func TestCheckFileObjectOfTheRenderedEnv(t *testing.T) {
	for _, kind := range []string{"configs", "secrets"} {
		for _, file := range []string{"./.env", ".env", "./config/../.env"} {
			compose := "services:\n  app:\n    image: x\n    " + kind + ": [all]\n" + kind + ":\n  all:\n    file: " + file + "\n"
			r := checkOne(compose, nil)
			assert.NotEmpty(t, privilegedDetails(r), "%s file %s: %v", kind, file, r.Findings)
		}
	}
}
