package compose

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

const testCompose = `services:
  web:
    image: registry.monky.internal/web:1.4.2
    healthcheck:
      test: ["CMD", "true"]
  worker:
    image: registry.monky.internal/worker:1.4.2
`

type fixture struct {
	t      *testing.T
	client *Client
	docker *fakedocker.Docker
	dir    string
	logs   *bytes.Buffer
}

// newFixture installs the fake docker with script and a project directory holding
// compose.yaml and override.yaml, and returns a Client on it.
func newFixture(t *testing.T, script *fakedocker.Script, edit ...func(*Config)) fixture {
	t.Helper()
	d := deploydtest.NewDocker(t, &fakedocker.Options{Script: script})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(testCompose), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "override.yaml"), []byte("services:\n  worker:\n    environment:\n      A: b\n"), 0o644))
	logs := &bytes.Buffer{}
	cfg := Config{
		Project: "monky",
		Dir:     dir,
		Files:   []string{"compose.yaml", "override.yaml"},
		Env:     d.Env("COMPOSE_PROJECT_NAME=monky"),
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	return fixture{t: t, client: c, docker: d, dir: dir, logs: logs}
}

// calls is the fake docker's record; it fails the test when it cannot be read.
func (f fixture) calls() []fakedocker.Call {
	f.t.Helper()
	calls, err := f.docker.Calls()
	require.NoError(f.t, err)
	return calls
}

// status is the fake docker's state; it fails the test when it cannot be read.
func (f fixture) status() fakedocker.Status {
	f.t.Helper()
	st, err := f.docker.Status()
	require.NoError(f.t, err)
	return st
}

// requireDockerError requires err to be an *Error of kind with code, of a docker whose
// exit code, in out and in the error, is exit (-1: it did not exit); it returns the
// *Error.
func requireDockerError(t *testing.T, out Output, err error, kind error, code codes.Code, exit int) *Error {
	t.Helper()
	require.ErrorIs(t, err, kind)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code())
	assert.Equal(t, exit, out.ExitCode)
	assert.Equal(t, exit, e.ExitCode)
	return e
}

func TestNewValidates(t *testing.T) {
	abs := t.TempDir()
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "ok", cfg: Config{Project: "monky", Dir: abs, Files: []string{"compose.yaml", "sub/x.yaml"}}},
		{name: "no project", cfg: Config{Dir: abs}, wantErr: "Project is required"},
		{name: "bad project", cfg: Config{Project: "Monky", Dir: abs}, wantErr: `project name "Monky"`},
		{name: "relative dir", cfg: Config{Project: "monky", Dir: "srv/monky"}, wantErr: `project directory "srv/monky"`},
		{name: "no dir", cfg: Config{Project: "monky"}, wantErr: "want an absolute path"},
		{name: "absolute file", cfg: Config{Project: "monky", Dir: abs, Files: []string{"/etc/compose.yaml"}}, wantErr: `compose file "/etc/compose.yaml"`},
		{name: "escaping file", cfg: Config{Project: "monky", Dir: abs, Files: []string{"../compose.yaml"}}, wantErr: `compose file "../compose.yaml"`},
		{name: "empty file", cfg: Config{Project: "monky", Dir: abs, Files: []string{""}}, wantErr: `compose file ""`},
		{name: "negative limit", cfg: Config{Project: "monky", Dir: abs, OutputLimit: -1}, wantErr: "OutputLimit -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Nil(t, c)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, c)
		})
	}
}

// TestValidProjectName: compose's rule, which New and the agent's config check share.
func TestValidProjectName(t *testing.T) {
	for name, want := range map[string]bool{
		"monky": true, "m": true, "0": true, "monky-dev_01": true,
		"": false, "Monky": false, "-monky": false, "_monky": false, "mon.ky": false, "mon ky": false,
	} {
		assert.Equal(t, want, ValidProjectName(name), "%q", name)
	}
}

// TestArgv checks the exact command lines, the working directory and that docker
// runs with exactly Config.Env. Serial: its subtests set a variable of the process
// environment (t.Setenv) that docker must not see.
func TestArgv(t *testing.T) {
	base := []string{"compose", "--project-name", "monky", "--project-directory", "DIR", "-f", "compose.yaml", "-f", "override.yaml"}
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, c *Client) error
		want []string
	}{
		{"up", func(ctx context.Context, c *Client) error { _, err := c.Up(ctx); return err },
			append(slices.Clone(base), "up", "-d", "--remove-orphans")},
		{"down", func(ctx context.Context, c *Client) error { _, err := c.Down(ctx, false); return err },
			append(slices.Clone(base), "down", "--remove-orphans")},
		{"down -v", func(ctx context.Context, c *Client) error { _, err := c.Down(ctx, true); return err },
			append(slices.Clone(base), "down", "--remove-orphans", "-v")},
		{"ps", func(ctx context.Context, c *Client) error { _, err := c.PS(ctx); return err },
			append(slices.Clone(base), "ps", "--all", "--format", "json")},
		{"logs", func(ctx context.Context, c *Client) error {
			_, err := c.Logs(ctx, []string{"web", "worker"}, 50)
			return err
		},
			append(slices.Clone(base), "logs", "--no-color", "--tail", "50", "web", "worker")},
		{"logs default lines", func(ctx context.Context, c *Client) error { _, err := c.Logs(ctx, nil, 0); return err },
			append(slices.Clone(base), "logs", "--no-color", "--tail", "100")},
		{"version", func(ctx context.Context, c *Client) error { _, err := c.DockerVersion(ctx); return err },
			[]string{"version", "--format", "{{.Server.Version}}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MONKY_PROCESS_ONLY", "must-not-reach-docker")
			f := newFixture(t, nil)
			require.NoError(t, tc.call(t.Context(), f.client))
			calls := f.calls()
			require.Len(t, calls, 1)
			want := slices.Clone(tc.want)
			for i, a := range want {
				if a == "DIR" {
					want[i] = f.dir
				}
			}
			assert.Equal(t, want, calls[0].Argv)
			assert.Equal(t, f.dir, calls[0].Dir)
			assert.Equal(t, []string{"COMPOSE_PROJECT_NAME", "DOCKER_HOST", "PATH"}, calls[0].Env,
				"docker gets exactly Config.Env, nothing of the process environment")
		})
	}
}

// TestDockerLookedUpInConfigEnvPath: docker is found on Config.Env's PATH only. Serial:
// a subtest sets the process's PATH (t.Setenv).
func TestDockerLookedUpInConfigEnvPath(t *testing.T) {
	t.Run("process PATH is not used", func(t *testing.T) {
		d := deploydtest.NewDocker(t, nil)
		t.Setenv("PATH", d.Dir) // the process could find it; Config.Env has no PATH
		c, err := New(Config{Project: "monky", Dir: t.TempDir(), Env: []string{"FAKE_DOCKER_LOG=" + d.Log}})
		require.NoError(t, err)
		_, err = c.Up(t.Context())
		require.ErrorIs(t, err, exec.ErrNotFound)
		require.ErrorIs(t, err, ErrApplyFailed)
		calls, err := d.Calls()
		require.NoError(t, err)
		assert.Empty(t, calls)
	})
	t.Run("relative PATH entries are skipped", func(t *testing.T) {
		d := deploydtest.NewDocker(t, nil)
		rel, err := filepath.Rel(t.TempDir(), d.Dir)
		require.NoError(t, err)
		_, err = lookPath("docker", []string{"PATH=" + rel})
		require.ErrorIs(t, err, exec.ErrNotFound)
	})
	t.Run("explicit path", func(t *testing.T) {
		d := deploydtest.NewDocker(t, nil)
		c, err := New(Config{Docker: d.Path, Project: "monky", Dir: t.TempDir(), Env: []string{"FAKE_DOCKER_LOG=" + d.Log}})
		require.NoError(t, err)
		v, err := c.DockerVersion(t.Context())
		require.NoError(t, err)
		assert.Equal(t, fakedocker.DefaultServerVersion, v)
	})
	t.Run("last PATH wins", func(t *testing.T) {
		d := deploydtest.NewDocker(t, nil)
		p, err := lookPath("docker", []string{"PATH=/nonexistent", "PATH=/nonexistent:" + d.Dir})
		require.NoError(t, err)
		assert.Equal(t, d.Path, p)
	})
}

func TestUp(t *testing.T) {
	t.Parallel()
	t.Run("success", func(t *testing.T) {
		f := newFixture(t, nil)
		out, err := f.client.Up(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 0, out.ExitCode)
		assert.Contains(t, out.String(), "Container monky-web-1  Started")
		st := f.status()
		assert.True(t, st.Up)
		assert.Equal(t, []string{"web", "worker"}, st.Services)
	})
	t.Run("failure keeps the output tail", func(t *testing.T) {
		noise := strings.Repeat("pulling layer 0123456789abcdef\n", 10000) // ~300 KiB
		f := newFixture(t, &fakedocker.Script{Commands: map[string]fakedocker.Command{
			"up": {Stdout: noise, Stderr: "Error response from daemon: pull access denied for registry.monky.internal/web\n", Exit: 18},
		}}, func(c *Config) { c.OutputLimit = 4096 })
		out, err := f.client.Up(t.Context())
		requireDockerError(t, out, err, ErrApplyFailed, codes.ApplyFailed, 18)
		assert.Len(t, out.Tail, 4096)
		assert.Equal(t, int64(len(noise)+len("Error response from daemon: pull access denied for registry.monky.internal/web\n")-4096), out.Dropped)
		assert.True(t, strings.HasSuffix(out.String(), "pull access denied for registry.monky.internal/web\n"))
		assert.NotContains(t, err.Error(), "pull access denied", "the error names the operation; the output is in Output")
		assert.False(t, f.status().Up)
		assert.Contains(t, f.logs.String(), "docker compose up failed")
	})
	t.Run("fails once then succeeds", func(t *testing.T) {
		f := newFixture(t, &fakedocker.Script{Commands: map[string]fakedocker.Command{
			"up": {Stderr: "network monky_default: conflict\n", FailTimes: 1},
		}})
		_, err := f.client.Up(t.Context())
		require.ErrorIs(t, err, ErrApplyFailed)
		_, err = f.client.Up(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 2, f.status().Calls["up"])
	})
	t.Run("a missing compose file fails up", func(t *testing.T) {
		f := newFixture(t, nil, func(c *Config) { c.Files = []string{"compose.yaml", "missing.yaml"} })
		out, err := f.client.Up(t.Context())
		require.ErrorIs(t, err, ErrApplyFailed)
		assert.Contains(t, out.String(), "missing.yaml")
	})
	t.Run("cancel kills docker", func(t *testing.T) {
		f := newFixture(t, &fakedocker.Script{Commands: map[string]fakedocker.Command{
			"up": {Delay: time.Minute},
		}})
		// Cancelled once docker has recorded the call and sleeps in it, not after a
		// fixed 300 ms: on a loaded machine docker had not started by then.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cancelled := make(chan time.Time, 1)
		go func() {
			for calls, _ := f.docker.Calls(); len(calls) == 0 && ctx.Err() == nil; calls, _ = f.docker.Calls() {
				time.Sleep(5 * time.Millisecond)
			}
			cancelled <- time.Now()
			cancel()
		}()
		out, err := f.client.Up(ctx)
		assert.Less(t, time.Since(<-cancelled), 10*time.Second, "Up returns at the cancel, not when docker's minute is over")
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, ErrApplyFailed)
		assert.Equal(t, -1, out.ExitCode, "killed, not exited")
		assert.Len(t, f.calls(), 1, "the call was made once")
		assert.False(t, f.status().Up, "killed before it took effect")
	})
	t.Run("cancelled before the call", func(t *testing.T) {
		f := newFixture(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := f.client.Up(ctx)
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, f.calls())
	})
}

func TestDown(t *testing.T) {
	t.Parallel()
	for _, volumes := range []bool{false, true} {
		t.Run(map[bool]string{false: "keep volumes", true: "remove volumes"}[volumes], func(t *testing.T) {
			f := newFixture(t, nil)
			_, err := f.client.Up(t.Context())
			require.NoError(t, err)
			_, err = f.client.Down(t.Context(), volumes)
			require.NoError(t, err)
			st := f.status()
			assert.False(t, st.Up)
			assert.Equal(t, volumes, st.DownVolumes)
			cs, err := f.client.PS(t.Context())
			require.NoError(t, err)
			assert.Empty(t, cs, "nothing left after down")
		})
	}
	t.Run("failure", func(t *testing.T) {
		f := newFixture(t, &fakedocker.Script{Commands: map[string]fakedocker.Command{"down": {Stderr: "boom\n", Exit: 1}}})
		out, err := f.client.Down(t.Context(), false)
		require.ErrorIs(t, err, ErrApplyFailed)
		assert.Equal(t, "boom\n", out.String())
	})
}

func TestPS(t *testing.T) {
	t.Parallel()
	for _, format := range []string{fakedocker.PSLines, fakedocker.PSArray} {
		t.Run(format, func(t *testing.T) {
			f := newFixture(t, &fakedocker.Script{PSFormat: format, Services: map[string]fakedocker.Service{
				"migrate": {States: []fakedocker.State{{State: "exited"}}},
			}})
			cs, err := f.client.PS(t.Context())
			require.NoError(t, err)
			assert.Empty(t, cs, "no containers before up: no output (lines) or [] (array)")
			_, err = f.client.Up(t.Context())
			require.NoError(t, err)
			cs, err = f.client.PS(t.Context())
			require.NoError(t, err)
			require.Len(t, cs, 3)
			got := map[string]Container{}
			for _, c := range cs {
				got[c.Service] = c
			}
			assert.Equal(t, "healthy", got["web"].Health)
			assert.Equal(t, "running", got["worker"].State)
			assert.Empty(t, got["worker"].Health)
			assert.Equal(t, "exited", got["migrate"].State, "--all shows exited containers")
			assert.Equal(t, "monky-web-1", got["web"].Name)
		})
	}
	t.Run("failure", func(t *testing.T) {
		f := newFixture(t, &fakedocker.Script{Commands: map[string]fakedocker.Command{"ps": {Stderr: "Cannot connect to the Docker daemon\n", Exit: 1}}})
		_, err := f.client.PS(t.Context())
		require.ErrorIs(t, err, ErrCommandFailed)
	})
	t.Run("unreadable output", func(t *testing.T) {
		f := newFixture(t, &fakedocker.Script{Commands: map[string]fakedocker.Command{"ps": {Stdout: "WARNING: something\n"}}})
		_, err := f.client.PS(t.Context())
		require.ErrorIs(t, err, ErrCommandFailed)
		assert.Contains(t, err.Error(), "ps output")
	})
}

func TestLogs(t *testing.T) {
	t.Parallel()
	var lines strings.Builder
	for i := range 500 {
		lines.WriteString(strings.Repeat("x", 40) + " line " + string(rune('a'+i%26)) + "\n")
	}
	lines.WriteString("panic: last words\n")
	f := newFixture(t, &fakedocker.Script{Services: map[string]fakedocker.Service{
		"web":    {Logs: lines.String()},
		"worker": {Logs: "worker ok\n"},
	}}, func(c *Config) { c.OutputLimit = 1024 })
	_, err := f.client.Up(t.Context())
	require.NoError(t, err)

	out, err := f.client.Logs(t.Context(), []string{"worker"}, 10)
	require.NoError(t, err)
	assert.Equal(t, "monky-worker-1  | worker ok\n", string(out))

	out, err = f.client.Logs(t.Context(), []string{"web"}, 1000)
	require.NoError(t, err)
	assert.Len(t, out, 1024, "bounded by OutputLimit")
	assert.True(t, strings.HasSuffix(string(out), "monky-web-1  | panic: last words\n"))

	_, err = f.client.Logs(t.Context(), []string{"--follow"}, 10)
	require.ErrorIs(t, err, ErrCommandFailed)
	_, err = f.client.Logs(t.Context(), []string{"nosuch"}, 10)
	require.ErrorIs(t, err, ErrCommandFailed)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, []string{"nosuch"}, e.Services)
}

// TestDockerVersion: a daemon out of reach is ErrCommandFailed, no docker on
// Config.Env's PATH exec.ErrNotFound. The server's version read:
// TestDockerLookedUpInConfigEnvPath's explicit path.
func TestDockerVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &fakedocker.Script{Commands: map[string]fakedocker.Command{"version": {
		Stdout: "Client:\n Version: 27.3.1\n", Stderr: "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n", Exit: 1,
	}}})
	v, err := f.client.DockerVersion(t.Context())
	require.ErrorIs(t, err, ErrCommandFailed)
	assert.Empty(t, v)
	c, err := New(Config{Project: "monky", Dir: t.TempDir(), Env: []string{"PATH=" + t.TempDir()}})
	require.NoError(t, err)
	_, err = c.DockerVersion(t.Context())
	require.ErrorIs(t, err, exec.ErrNotFound)
}

func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		kind error
		code codes.Code
	}{
		{ErrApplyFailed, codes.ApplyFailed},
		{ErrCommandFailed, ""}, // no code of its own: its cause speaks
		{ErrUnhealthy, codes.Unhealthy},
		{ErrHealthTimeout, codes.HealthTimeout},
	} {
		t.Run(tc.kind.Error(), func(t *testing.T) {
			cause := errors.New("cause")
			var err error = &Error{Op: "wait", Kind: tc.kind, Services: []string{"web"}, Err: cause}
			assert.ErrorIs(t, err, tc.kind)
			assert.ErrorIs(t, err, cause)
			var coded interface{ Code() codes.Code }
			require.ErrorAs(t, err, &coded)
			assert.Equal(t, tc.code, coded.Code())
			assert.Contains(t, err.Error(), "web")
		})
	}
}

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Op: "wait", Kind: ErrUnhealthy, Services: []string{"db", "web"}, Err: errors.New("cause")},
			"compose wait: services unhealthy: db, web: cause"},
		{&Error{Op: "wait", Kind: ErrUnhealthy, Services: []string{"web"}, Detail: "web: unhealthy"}, "compose wait: services unhealthy: web: unhealthy"},
		{&Error{Op: "up", Kind: ErrApplyFailed, ExitCode: 1}, "compose up: docker compose failed"},
		// Degenerate: no Kind (was "compose up: <nil>: …"), an empty service name (was a trailing ": "), no Op.
		{&Error{Op: "up", Err: errors.New("exit status 1")}, "compose up: exit status 1"},
		{&Error{Op: "ps", Kind: ErrCommandFailed, Services: []string{""}}, "compose ps: docker command failed"},
		{&Error{Kind: ErrApplyFailed}, "compose: docker compose failed"},
	} {
		assert.Equal(t, tc.want, tc.err.Error())
	}
}

func TestValidServerVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"27.3.1": true, "20.10.24+dfsg1": true, "": false, "27.3.1 extra": false, "a\nb": false,
		"x\x1b[31m": false, strings.Repeat("9", 64): true, strings.Repeat("9", 65): false,
	} {
		assert.Equal(t, want, ValidServerVersion(v), "%q", v)
	}
}

// TestPullFailureWhoseFault: what the daemon says of a failed pull decides whose
// fault it is. The messages are the daemon's own, as docker pull prints them (moby's
// distribution/errors.go and registry client, containerd's resolver and fetcher for
// the containerd image store, what docker pull printed on dockerd 20.10 against a
// local registry, and reports of users).
func TestPullFailureWhoseFault(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "pull-failures.txt"))
	require.NoError(t, err)
	kinds := map[codes.Code]error{codes.ImageMissing: ErrImageMissing, codes.RegistryUnavailable: ErrRegistryUnavailable,
		codes.DockerUnavailable: ErrDockerUnavailable, codes.DiskFull: ErrPullFailed, codes.PullFailed: ErrPullFailed}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")[1:] // a comment, then the cases
	require.Len(t, lines, 39)
	for _, line := range lines {
		code, said, ok := strings.Cut(line, "\t")
		require.True(t, ok, "%q: no tab", line)
		t.Run(said, func(t *testing.T) {
			wrap, kind := pullFailure([]byte("5e6f7a8b9c0d: Pulling fs layer\n" + said + "\n"))
			assert.Equal(t, kinds[codes.Code(code)], kind)
			err := &Error{Op: "pull", Kind: kind, Err: wrap(errors.New("exit status 1"))}
			assert.Equal(t, codes.Code(code), err.Code())
			if said != "" {
				assert.Equal(t, strings.TrimPrefix(said, "Error response from daemon: "), daemonSaid([]byte("x: Pulling fs layer\n"+said+"\n")))
			}
		})
	}
	wrap, _ := pullFailure([]byte("failed to register layer: write /var/lib/docker/x: no space left on device\n"))
	assert.ErrorIs(t, wrap(errors.New("exit status 1")), syscall.ENOSPC, "a full data root is the box's DISK_FULL")
	assert.Equal(t, "docker printed nothing", daemonSaid(nil))
	assert.LessOrEqual(t, len(daemonSaid([]byte("Error: "+strings.Repeat("x", 1000)))), maxDaemonSaid+len("…"))
}

// FuzzPullFailure: whatever docker printed, a failed pull is one of the five kinds;
// a daemon that cannot be reached decides over anything else it printed, and a
// registry's "manifest unknown" over any network mark.
func FuzzPullFailure(f *testing.F) {
	f.Add([]byte("Error response from daemon: received unexpected HTTP status: 502 Bad Gateway"))
	f.Add([]byte("failed to register layer: no space left on device"))
	f.Add([]byte("\x00\n\r: dial tcp"))
	f.Fuzz(func(t *testing.T, out []byte) {
		_, kind := pullFailure(out)
		if !slices.Contains([]error{ErrImageMissing, ErrRegistryUnavailable, ErrDockerUnavailable, ErrPullFailed}, kind) {
			t.Fatalf("kind %v", kind)
		}
		if _, kind := pullFailure(append(slices.Clone(out), "\nCannot connect to the Docker daemon at unix:///var/run/docker.sock"...)); !errors.Is(kind, ErrDockerUnavailable) {
			t.Fatalf("a daemon out of reach is %v", kind)
		}
		if daemonDown(out) || bytes.Contains(out, []byte("no space left on device")) {
			return
		}
		if _, kind := pullFailure(append(slices.Clone(out), "\nmanifest unknown; dial tcp: i/o timeout"...)); !errors.Is(kind, ErrImageMissing) {
			t.Fatalf("a missing manifest is %v", kind)
		}
	})
}

// TestPullProgress: the layers docker pull's plain output names are counted, done
// when complete or already there, whatever chunks the output comes in.
func TestPullProgress(t *testing.T) {
	p := newPullProgress(nil, "x")
	out := "1.27: Pulling from library/nginx\n" +
		"a2318d6c47ec: Already exists\n" +
		"0a1b2c3d4e5f: Pulling fs layer\n0a1b2c3d4e5f: Waiting\n" +
		"9f8e7d6c5b4a: Pulling fs layer\n9f8e7d6c5b4a: Downloading\r9f8e7d6c5b4a: Download complete\n" +
		"9f8e7d6c5b4a: Pull complete\nDigest: sha256:abc\nStatus: Downloaded newer image for nginx:1.27\n"
	for i := 0; i < len(out); i += 7 {
		_, _ = p.Write([]byte(out[i:min(i+7, len(out))]))
	}
	done, seen := p.counts()
	assert.Equal(t, 2, done)
	assert.Equal(t, 3, seen)
}

// FuzzPullProgress: any output is read without a panic, and never counts more done
// layers than seen.
func FuzzPullProgress(f *testing.F) {
	f.Add([]byte("0a1b2c3d4e5f: Pulling fs layer\n0a1b2c3d4e5f: Pull complete\n"))
	f.Add([]byte("\r\r\n: : :\nDigest: x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := newPullProgress(nil, "x")
		_, _ = p.Write(b)
		_, _ = p.Write(b)
		done, seen := p.counts()
		if done > seen || seen > strings.Count(string(b), ":")*2 {
			t.Fatalf("done %d, seen %d", done, seen)
		}
	})
}

// TestPullThroughTheFake: Pull runs docker pull, logs its lines, and a slow pull says
// how far it is; MissingImages finds the image afterwards, asking once when all
// are held. A missing tag is
// ErrImageMissing naming the image and what the daemon said.
func TestPullThroughTheFake(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, &fakedocker.Script{
		MissingImages: []string{"registry.monky.internal/web:9"},
		Commands:      map[string]fakedocker.Command{"pull": {Delay: 150 * time.Millisecond}},
	})
	ctx := context.Background()
	missing, err := fx.client.MissingImages(ctx, []string{"registry.monky.internal/web:1.4.2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"registry.monky.internal/web:1.4.2"}, missing)

	require.NoError(t, fx.client.Pull(ctx, "registry.monky.internal/web:1.4.2", PullOptions{Progress: 40 * time.Millisecond}))
	calls := len(fx.calls())
	missing, err = fx.client.MissingImages(ctx, []string{"registry.monky.internal/web:1.4.2", "registry.monky.internal/worker:1.4.2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"registry.monky.internal/worker:1.4.2"}, missing, "the one not pulled")
	assert.Len(t, fx.calls(), calls+3, "one call for both, then one each")
	calls = len(fx.calls())
	missing, err = fx.client.MissingImages(ctx, []string{"registry.monky.internal/web:1.4.2"})
	require.NoError(t, err)
	assert.Empty(t, missing)
	assert.Len(t, fx.calls(), calls+1, "every image held: one docker call")
	logs := fx.logs.String()
	assert.Contains(t, logs, "still pulling the image")
	assert.Contains(t, logs, `output="Status: Downloaded newer image for registry.monky.internal/web:1.4.2"`)
	assert.Contains(t, logs, "pulled the image")

	err = fx.client.Pull(ctx, "registry.monky.internal/web:9", PullOptions{})
	require.ErrorIs(t, err, ErrImageMissing)
	assert.Contains(t, err.Error(), "registry.monky.internal/web:9: manifest for registry.monky.internal/web:9 not found: manifest unknown")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = fx.client.Pull(cancelled, "registry.monky.internal/web:1.4.2", PullOptions{})
	require.ErrorIs(t, err, context.Canceled)
}

// hookFixture is newFixture with a hook service behind the monky-hooks profile.
func hookFixture(t *testing.T, script *fakedocker.Script) fixture {
	t.Helper()
	f := newFixture(t, script)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "compose.yaml"),
		[]byte(testCompose+"  backup:\n    image: busybox\n    profiles: [monky-hooks]\n"), 0o644))
	return f
}

func TestRunHook(t *testing.T) {
	t.Parallel()
	base := []string{"compose", "--project-name", "monky", "--project-directory", "DIR", "-f", "compose.yaml", "-f", "override.yaml"}
	for _, tc := range []struct {
		name   string
		script *fakedocker.Script
		exit   int
		err    bool
		out    string
	}{
		{name: "exit 0", script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Stdout: "dumped\n"}}}, out: "dumped\n"},
		{name: "exit 3", script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Stderr: "failed\n", Exit: 3}}}, exit: 3, err: true, out: "failed\n"},
		{name: "exit 75", script: &fakedocker.Script{Hooks: map[string]fakedocker.Hook{"backup": {Exit: ExitLater}}}, exit: ExitLater, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := hookFixture(t, tc.script)
			out, err := f.client.RunHook(t.Context(), "monky-hooks", "backup", "monky-hook-backup-1")
			assert.Equal(t, tc.exit, out.ExitCode)
			assert.Equal(t, tc.err, err != nil, "err: %v", err)
			assert.Equal(t, tc.out, out.String())
			calls := f.calls()
			require.Len(t, calls, 1)
			want := append(slices.Clone(base), "--profile", "monky-hooks", "run", "--rm", "--no-deps", "-T", "--name", "monky-hook-backup-1", "backup")
			want[4] = f.dir
			assert.Equal(t, want, calls[0].Argv)
			assert.Empty(t, f.status().Services, "a hook runs no compose up")
		})
	}
	t.Run("names that are not names", func(t *testing.T) {
		f := hookFixture(t, nil)
		for _, args := range [][3]string{{"monky-hooks", "-x", "n"}, {"monky-hooks", "backup", "--privileged"}, {"", "backup", "n"}} {
			_, err := f.client.RunHook(t.Context(), args[0], args[1], args[2])
			require.Error(t, err, "%q", args)
		}
		assert.Empty(t, f.calls(), "no docker call")
	})
	t.Run("a service without the profile does not run", func(t *testing.T) {
		f := hookFixture(t, nil)
		out, err := f.client.RunHook(t.Context(), "other", "backup", "n")
		require.Error(t, err)
		assert.Contains(t, out.String(), "no such service: backup")
	})
}

func TestRemoveContainer(t *testing.T) {
	t.Parallel()
	f := hookFixture(t, nil)
	require.NoError(t, f.client.RemoveContainer(t.Context(), "monky-hook-backup-1"), "no such container is not an error")
	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"rm", "-f", "--", "monky-hook-backup-1"}, calls[0].Argv)
	require.Error(t, f.client.RemoveContainer(t.Context(), "-f"))
	assert.Len(t, f.calls(), 1)
}
