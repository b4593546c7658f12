package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// canaries are the secret values planted in the fake OpenBao: quotes, dollars,
// backslashes, a newline, and one (echo) that the fake docker prints back.
var canaries = map[string]struct {
	path, key, value string
}{
	"DB_PASSWORD": {"db", "password", `pa"ss$HOME'w0rd-canary-db`},
	"API_KEY":     {"api", "key", "canary-line-one-Kq\ncanary-line-two-Zx"},
	"SIGNING":     {"signing", "pem", `C:\canary\$${PATH}-sig$$`},
	"ECHOED":      {"echo", "value", "echoed-canary-5f3a9"},
}

// bearerEchoRE finds the bearer a leaky fake tenancy quotes in its error messages.
var bearerEchoRE = regexp.MustCompile(`\(bearer was ([^)"]+)\)`)

// canaryBundle is the sample application reading every canary.
func canaryBundle(env string, serial int64) faketenancy.BundleSpec {
	bn := faketenancy.SampleApp(env, serial)
	bn.Secrets = map[string]faketenancy.SecretRef{}
	for name, c := range canaries {
		bn.Secrets[name] = faketenancy.SecretRef{Path: c.path, Key: c.key}
	}
	bn.Files["compose.yaml"] = `services:
  web:
    image: nginx:1.27
    environment:
      DB_PASSWORD: ${DB_PASSWORD}
      API_KEY: ${API_KEY}
      SIGNING: ${SIGNING}
      ECHOED: ${ECHOED}
    volumes:
      - ./config/app.toml:/etc/app/app.toml:ro
    healthcheck:
      test: ["CMD", "true"]
  migrate:
    image: busybox:1.36
    command: ["true"]
    restart: "no"
`
	return bn
}

// needles are the forms in which a value could leak: raw, JSON-escaped, Go-quoted
// (the slog text handler), and each line of a multi-line value.
func needles(v string) []string {
	out := []string{v}
	j, _ := json.Marshal(v)
	out = append(out, string(j[1:len(j)-1]))
	q := strconv.Quote(v)
	out = append(out, q[1:len(q)-1])
	if strings.Contains(v, "\n") {
		for _, l := range strings.Split(v, "\n") {
			if len(l) >= 8 {
				out = append(out, l)
			}
		}
	}
	return out
}

// TestSecretCanary plants secrets, a token and grants, runs the binary through a
// sequence with failures, and looks for them everywhere the agent writes: stderr,
// stdout, the reports and check-ins tenancy received, every file under the state
// directory, every file of the releases except the .env, status and status --json.
func TestSecretCanary(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{record: true})
	for _, c := range canaries {
		b.Stack.Bao.PutSecret(b.Env, c.path, map[string]string{c.key: c.value})
	}
	echo := canaries["ECHOED"].value
	multi := canaries["API_KEY"].value
	var outputs []string
	run := func(want int, args ...string) {
		t.Helper()
		res := b.runExit(want, args, "MONKY_DEPLOYD_DEBUG=1") // the most verbose the agent gets
		outputs = append(outputs, res.Stdout, res.Stderr)
	}
	tick := func(want int) {
		t.Helper()
		run(want, "run", "--config", b.CfgPath, "--metrics-file", filepath.Join(b.Cfg.StateDir, "agent.prom"))
	}

	// 1. apply, with compose up echoing a secret on stderr.
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: "warning: variable ECHOED=" + echo + " looks like a password\n"},
	}}))
	good := b.Publish(canaryBundle(b.Env, 1))
	tick(0)
	require.Equal(t, good, b.Live())

	// 2. an unhealthy apply that restores: the failing service's logs echo secrets.
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{
		Commands: map[string]fakedocker.Command{"up": {Stderr: "up: using " + echo + "\n"}},
		Services: map[string]fakedocker.Service{"web": {
			States: []fakedocker.State{{Health: "unhealthy"}},
			Logs:   "boot\nconnecting with " + canaries["DB_PASSWORD"].value + "\nkey " + multi + "\nfatal: " + echo + " refused\n",
		}},
	}))
	b.Publish(canaryBundle(b.Env, 2))
	tick(deployd.ExitFailed)
	require.Equal(t, good, b.Live(), "restored")
	rep := b.LastReport()
	require.Equal(t, "UNHEALTHY", rep.Code)
	require.Contains(t, rep.Tail, "fatal:", "the tail carries the logs (redacted)")

	// 3. compose up fails once, printing a secret: restore again.
	// fail_times counts every up call the fake has seen: fail the next one only.
	require.NoError(t, b.Docker.SetScript(&fakedocker.Script{Commands: map[string]fakedocker.Command{
		"up": {Stderr: "Error: invalid value " + echo + " for ECHOED\n", Exit: 1, FailTimes: b.DockerStatus().Calls["up"] + 1},
	}}))
	b.Publish(canaryBundle(b.Env, 3))
	tick(deployd.ExitFailed)
	require.Equal(t, "APPLY_FAILED", b.LastReport().Code)
	require.Contains(t, b.LastReport().Tail, "Error: invalid value")
	require.Equal(t, good, b.Live())

	// 4. a refusal.
	bad := canaryBundle(b.Env, 4)
	bad.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    privileged: true\n    environment:\n      X: ${DB_PASSWORD}\n"
	delete(bad.Files, "config/app.toml")
	b.Publish(bad)
	tick(deployd.ExitFailed)
	require.Equal(t, "PRIVILEGED", b.LastReport().Code)

	// 5. a leaky tenancy that quotes the bearer in its errors.
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{EchoBearer: true, Status: map[string]int{"checkin": 503}})
	tick(deployd.ExitTemporary)
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{})

	// 6. a leaky tenancy that latches AGENT_ENV_MISMATCH with the bearer in its message;
	// status shows the latch; a fresh grant clears it.
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{EchoBearer: true, Status: map[string]int{"checkin": 409}})
	tick(deployd.ExitEnvMismatch)
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
	require.NotNil(t, b.State().EnvMismatch)
	require.NotEmpty(t, b.State().EnvMismatch.Message)
	run(deployd.VerdictCritical.Exit(), "status", "--config", b.CfgPath) // latched: critical
	run(deployd.VerdictCritical.Exit(), "status", "--config", b.CfgPath, "--json")
	b.PlaceGrant()
	run(0, "bootstrap", "--config", b.CfgPath)

	// 7. down.
	b.SetDesired(faketenancy.Desired{Action: "down"})
	tick(0)
	require.Equal(t, "down", b.LastReport().Result)

	// 8. status, both ways.
	run(0, "status", "--config", b.CfgPath)
	run(0, "status", "--config", b.CfgPath, "--json")

	// What must never leak.
	type planted struct{ what, value string }
	var secrets, creds []planted
	for name, c := range canaries {
		secrets = append(secrets, planted{"secret " + name, c.value})
	}
	for i, g := range b.Grants {
		creds = append(creds, planted{"bootstrap grant " + strconv.Itoa(i), g})
	}
	wire := b.rec.credentials()
	for i, c := range wire {
		creds = append(creds, planted{"token or grant " + strconv.Itoa(i) + " seen on the wire", c})
	}
	// The run saw at least: 1 bootstrap login, 3 leases and their logins.
	require.GreaterOrEqual(t, len(wire), 7, "the recorder must have seen the tokens and grants")
	tok := readFile(t, b.Cfg.TokenPath())
	require.Contains(t, wire, strings.TrimSpace(string(tok)), "the live token was seen on the wire")
	// Tenancy's echo of the bearer did reach the agent.
	echoed := 0
	for _, body := range b.rec.bodies {
		for _, m := range bearerEchoRE.FindAllStringSubmatch(body, -1) {
			require.Contains(t, wire, m[1], "the echoed bearer is a token the recorder knows")
			echoed++
		}
	}
	require.GreaterOrEqual(t, echoed, 2, "the leaky tenancy quoted the bearer (503 and 409)")

	assertClean := func(where, text string, ps []planted) {
		t.Helper()
		for _, p := range ps {
			for _, n := range needles(p.value) {
				if strings.Contains(text, n) {
					t.Errorf("%s carries %s (form %q)", where, p.what, n)
				}
			}
		}
	}
	all := append(append([]planted{}, secrets...), creds...)
	for i, o := range outputs {
		assertClean("output "+strconv.Itoa(i), o, all)
	}
	reports := b.Stack.Tenancy.Reports(b.Env)
	require.Len(t, reports, 5, "applied, failed ×3, down")
	for i, r := range reports {
		data, err := json.Marshal(r)
		require.NoError(t, err)
		assertClean("report "+strconv.Itoa(i)+" ("+r.Result+" "+r.Code+")", string(data), all)
	}
	for i, c := range b.Stack.Tenancy.Checkins(b.Env) {
		data, err := json.Marshal(c)
		require.NoError(t, err)
		assertClean("check-in "+strconv.Itoa(i), string(data), all)
	}
	// Every file under the state directory; bao.token holds the live token by design,
	// and nothing else.
	files := 0
	require.NoError(t, filepath.WalkDir(b.Cfg.StateDir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return nil
		}
		files++
		data := readFile(t, p)
		if p == b.Cfg.TokenPath() {
			assertClean(p, string(data), secrets)
			assert.Equal(t, strings.TrimSpace(string(data)), strings.TrimSpace(string(tok)))
			return nil
		}
		assertClean(p, string(data), all)
		return nil
	}))
	require.GreaterOrEqual(t, files, 3, "state.json, bao.token and the metrics file at least")
	// Every file of the deploy directory: the .env (0600) is the one place the secret
	// values are, and it holds no token or grant.
	envFiles := 0
	require.NoError(t, filepath.WalkDir(b.Cfg.DeployDir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		data := readFile(t, p)
		if filepath.Base(p) != ".env" {
			assertClean(p, string(data), all)
			return nil
		}
		envFiles++
		info, err := d.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), p)
		assertClean(p, string(data), creds)
		got, err := dotenv.Parse(strings.NewReader(string(data)))
		require.NoError(t, err)
		for name, c := range canaries {
			assert.Equal(t, c.value, got[name], "%s in %s reads back exactly", name, p)
		}
		return nil
	}))
	require.Positive(t, envFiles)
	// The fake docker's own record (argv and the names of the environment).
	for _, f := range []string{b.Docker.Log, b.Docker.State} {
		assertClean(f, string(readFile(t, f)), all)
	}
}
