package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestMain removes the binary the process tests built.
func TestMain(m *testing.M) { os.Exit(testprog.Run(m)) }

type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	addrs  addresses
}

func start(t *testing.T, args ...string) *process {
	t.Helper()
	// built once per test process (under go test -short testprog.Build skips the
	// test); testprog, not testbox: this test links no agent
	cmd := exec.Command(testprog.Build(t, "github.com/monky/monky-deployd/cmd/monky-fakes"), args...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &process{cmd: cmd, stdin: stdin, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "stderr: %s", p.stderr)
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&p.addrs))
	for _, u := range []string{p.addrs.TenancyURL, p.addrs.BaoAddr, p.addrs.AdminURL} {
		require.True(t, strings.HasPrefix(u, "http://127.0.0.1:"), "loopback only: %s", u)
	}
	return p
}

func (p *process) wait(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		t.Fatalf("monky-fakes did not stop; stderr: %s", p.stderr)
		return -1
	}
}

func (p *process) admin(t *testing.T, method, path string, body io.Reader, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, p.addrs.AdminURL+path, body)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// TestProcess drives the binary through its admin API, a real vault/api client and
// the tenancy client, then closes stdin.
func TestProcess(t *testing.T) {
	const env = "env-dev-01"
	p := start(t)
	ctx := t.Context()

	var grant struct{ Grant string }
	require.Equal(t, 200, p.admin(t, http.MethodPost, "/envs/"+env+"/grants", nil, &grant))
	var version struct{ Version int }
	require.Equal(t, 200, p.admin(t, http.MethodPut, "/envs/"+env+"/secrets/db", strings.NewReader(`{"password":"planted-s3cret"}`), &version))
	assert.Equal(t, 1, version.Version)

	for _, v := range []string{"VAULT_ADDR", "VAULT_AGENT_ADDR", "VAULT_TOKEN", "VAULT_NAMESPACE", "VAULT_WRAP_TTL", "VAULT_SKIP_VERIFY"} {
		t.Setenv(v, "")
	}
	cfg := vault.DefaultConfig()
	require.NoError(t, cfg.Error)
	cfg.Address, cfg.MaxRetries = p.addrs.BaoAddr, 0
	vc, err := vault.NewClient(cfg)
	require.NoError(t, err)
	vc.ClearToken()
	login, err := vc.Logical().WriteWithContext(ctx, "auth/jwt-tenancy/login", map[string]any{"role": "see-env", "jwt": grant.Grant})
	require.NoError(t, err)
	require.NotNil(t, login.Auth)
	token := login.Auth.ClientToken
	vc.SetToken(token)
	kv, err := vc.KVv2("secret").Get(ctx, "envs/"+env+"/db")
	require.NoError(t, err)
	assert.Equal(t, "planted-s3cret", kv.Data["password"])
	_, err = vc.KVv2("secret").Get(ctx, "envs/env-dev-02/db")
	require.Error(t, err, "env pinning: another env's secret is denied")

	tc, err := tenancy.New(tenancy.Config{BaseURL: p.addrs.TenancyURL, HTTPClient: &http.Client{},
		Token: func(context.Context) (secret.Value, error) { return secret.New(token), nil }})
	require.NoError(t, err)
	ins, err := tc.Checkin(ctx, tenancy.Checkin{EnvID: env})
	require.NoError(t, err)
	assert.Equal(t, tenancy.ActionNone, ins.Action)

	b := deploydtest.MakeBundle(t, faketenancy.BundleSpec{EnvID: env})
	var pub struct {
		SHA    string
		Serial int64
	}
	require.Equal(t, 200, p.admin(t, http.MethodPost, "/envs/"+env+"/bundles", bytes.NewReader(b.Data), &pub))
	assert.Equal(t, b.SHA, pub.SHA)
	assert.Equal(t, int64(1), pub.Serial)
	ins, err = tc.Checkin(ctx, tenancy.Checkin{EnvID: env})
	require.NoError(t, err)
	assert.Equal(t, tenancy.Instruction{Action: tenancy.ActionApply, SHA: b.SHA, Serial: 1, NextCheckin: time.Minute}, ins)

	require.Equal(t, 204, p.admin(t, http.MethodPut, "/envs/"+env+"/desired", strings.NewReader(`{"action":"down","purge":true}`), nil))
	ins, err = tc.Checkin(ctx, tenancy.Checkin{EnvID: env})
	require.NoError(t, err)
	assert.Equal(t, tenancy.Instruction{Action: tenancy.ActionDown, Purge: true, NextCheckin: time.Minute}, ins)

	require.NoError(t, tc.Report(ctx, tenancy.Report{EnvID: env, Result: tenancy.ResultDown, Duration: time.Second}))
	var rep map[string]any
	require.Equal(t, 200, p.admin(t, http.MethodGet, "/envs/"+env+"/reports/1?timeout=5s", nil, &rep))
	assert.Equal(t, "down", rep["result"])
	var reports []map[string]any
	require.Equal(t, 200, p.admin(t, http.MethodGet, "/envs/"+env+"/reports", nil, &reports))
	assert.Len(t, reports, 1)

	require.Equal(t, 204, p.admin(t, http.MethodPut, "/faults", strings.NewReader(`{"sealed":true,"status":{"lease":429},"retry_after_s":90}`), nil))
	_, err = vc.KVv2("secret").Get(ctx, "envs/"+env+"/db")
	require.ErrorContains(t, err, "sealed")
	_, err = tc.Lease(ctx, env, b.SHA)
	require.ErrorIs(t, err, tenancy.ErrRateLimited)
	after, _ := tenancy.RetryAfter(err)
	assert.Equal(t, 90*time.Second, after)
	var faults map[string]any
	require.Equal(t, 200, p.admin(t, http.MethodGet, "/faults", nil, &faults))
	assert.Equal(t, true, faults["sealed"])
	require.Equal(t, 400, p.admin(t, http.MethodPut, "/faults", strings.NewReader(`{"lease_shape":"kerberos"}`), nil))

	var reqs []map[string]any
	require.Equal(t, 200, p.admin(t, http.MethodGet, "/requests", nil, &reqs))
	services := map[any]int{}
	for _, r := range reqs {
		services[r["service"]]++
	}
	assert.Positive(t, services["tenancy"])
	assert.Positive(t, services["bao"])
	raw, _ := json.Marshal(reqs)
	assert.NotContains(t, string(raw), token)

	require.NoError(t, p.stdin.Close())
	assert.Equal(t, 0, p.wait(t))
	assert.NotContains(t, p.stderr.String(), token)
	assert.NotContains(t, p.stderr.String(), grant.Grant)
}

func TestProcessStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := start(t, "-watch-stdin=false")
			require.NoError(t, p.cmd.Process.Signal(sig))
			assert.Equal(t, 0, p.wait(t))
			assert.Contains(t, p.stderr.String(), "stopping: signal")
		})
	}
}

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not_loopback", []string{"-admin-addr", "0.0.0.0:0"}, "must be a loopback IP"},
		{"hostname", []string{"-admin-addr", "localhost:0"}, "must be a loopback IP"},
		{"unknown_flag", []string{"-port", "1"}, "flag provided but not defined"},
		{"argument", []string{"extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, strings.NewReader(""), &stdout, &stderr)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestRunInProcess(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), []string{"-lease-budget", "2"}, inR, outW, io.Discard)
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err, "no address line")
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	var addrs addresses
	require.NoError(t, json.Unmarshal([]byte(line), &addrs))
	resp, err := http.Get(addrs.AdminURL + "/requests")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	require.NoError(t, inW.Close())
	assert.Equal(t, 0, <-done)
}
