package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// prompt is how long a refusal of a file that is not regular may take: it must not
// wait on the file.
const prompt = 10 * time.Second

// runPrompt runs the binary with args and fails the test if it has not ended within
// prompt (the run is killed then).
func (b *box) runPrompt(t *testing.T, args ...string) result {
	t.Helper()
	res := b.start(args).Wait(t, 2*prompt)
	assert.Less(t, res.Elapsed, prompt, "monky-deployd %s must not wait on the file", strings.Join(args, " "))
	return res
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, syscall.Mkfifo(p, 0o600))
}

// TestBinaryRefusesFifoFiles: a config, grant, token or state file that is a fifo (no
// writer: a blocking open hangs for ever) is refused at once, exit 1, with its path
// and what it is named; nothing reaches the network with it.
func TestBinaryRefusesFifoFiles(t *testing.T) {
	t.Run("config", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		cfg := filepath.Join(b.Dir, "fifo.yaml")
		mkfifo(t, cfg)
		for _, cmd := range []string{"run", "status", "bootstrap"} {
			res := b.runPrompt(t, cmd, "--config", cfg)
			assert.Equal(t, deployd.ExitFailed, res.Code, "%s:\n%s", cmd, res.Stderr)
			assert.Contains(t, res.Stderr, cfg+": cannot read: a fifo, not a regular file", cmd)
			assert.Contains(t, res.Stderr, "code=CONFIG_INVALID", cmd)
			assert.Empty(t, res.Stdout, cmd)
		}
		assert.Empty(t, b.Stack.Tenancy.Requests())
		assert.Empty(t, b.Stack.Bao.Requests())
	})

	t.Run("grant", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		mkfifo(t, b.Cfg.BootstrapGrant)
		for _, args := range [][]string{{"run"}, {"bootstrap"}, {"bootstrap", "--force"}} {
			res := b.runPrompt(t, append(args, "--config", b.CfgPath)...)
			assert.Equal(t, deployd.ExitFailed, res.Code, "%v:\n%s", args, res.Stderr)
			assert.Contains(t, res.Stderr, b.Cfg.BootstrapGrant+" is a fifo, not a regular file", args)
			assert.Contains(t, res.Stderr, "code=UNAUTHENTICATED", args)
		}
		assert.Zero(t, countBao(b, "/login"), "no login with what a fifo holds")
		assert.Empty(t, b.Stack.Tenancy.Requests())
		fi, err := os.Lstat(b.Cfg.BootstrapGrant)
		require.NoError(t, err)
		assert.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "the fifo is left where it is")
	})

	t.Run("token", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		mkfifo(t, b.Cfg.TokenPath())
		res := b.runPrompt(t, "run", "--config", b.CfgPath)
		assert.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, b.Cfg.TokenPath()+" is a fifo, not a regular file")
		assert.Contains(t, res.Stderr, "code=STATE_UNAVAILABLE")
		assert.Empty(t, b.Stack.Tenancy.Requests())
		assert.Empty(t, b.Stack.Bao.Requests())
		_, err := os.Stat(b.Cfg.BootstrapGrant)
		assert.NoError(t, err, "the grant is kept")

		res = b.runPrompt(t, "status", "--config", b.CfgPath)
		assert.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
		assert.Regexp(t, `(?m)^token:\s+unreadable: `+b.Cfg.TokenPath()+` is a fifo, not a regular file$`, res.Stdout)
	})

	t.Run("state", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		mkfifo(t, b.Cfg.StatePath())
		for _, cmd := range []string{"run", "status", "bootstrap"} {
			res := b.runPrompt(t, cmd, "--config", b.CfgPath)
			assert.Equal(t, deployd.ExitFailed, res.Code, "%s:\n%s", cmd, res.Stderr)
			assert.Contains(t, res.Stderr, b.Cfg.StatePath()+" is a fifo, not a regular file", cmd)
		}
		assert.Empty(t, b.Stack.Tenancy.Requests())
	})
}

// TestBinaryCorruptToken: a token file a crash or a disk left unusable (NULs, not
// printable, empty, too long) is known as corrupt when read, never sent (it would be
// an invalid header, an endless exit 75): with a grant present the run bootstraps
// from it; without one it exits 1 with UNAUTHENTICATED and says what to do.
func TestBinaryCorruptToken(t *testing.T) {
	corrupt := map[string][]byte{
		"nul":       make([]byte, 96),
		"binary":    []byte("hvs.abc\xff\xfe\x01def\n"),
		"blank":     []byte(" \n\t\n"),
		"inner nul": []byte("hvs.CAESIJ\x00\x00\x00\x00\n"),
		"too long":  []byte(strings.Repeat("a", 8192) + "\n"),
	}
	for name, data := range corrupt {
		t.Run(name+", grant present", func(t *testing.T) {
			b := newBox(t, boxOpts{})
			b.SetDesired(faketenancy.Desired{Action: "none"})
			require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
			require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), data, 0o600))
			res := b.tick()
			require.Equal(t, deployd.ExitOK, res.Code, res.Stderr)
			assert.Contains(t, res.Stderr, "the OpenBao token file is corrupt; bootstrapping from the grant file")
			assert.Equal(t, 1, countBao(b, "/login"))
			_, err := os.Stat(b.Cfg.BootstrapGrant)
			assert.ErrorIs(t, err, os.ErrNotExist, "the grant is consumed")
			tok, err := os.ReadFile(b.Cfg.TokenPath())
			require.NoError(t, err)
			env, ok := b.Stack.Bao.TokenEnv(strings.TrimSpace(string(tok)))
			assert.True(t, ok, "a live token replaced the corrupt one")
			assert.Equal(t, b.Env, env)
		})
	}
	t.Run("nul, no grant", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 96), 0o600))
		for range 2 {
			res := b.tick()
			require.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
			assert.Contains(t, res.Stderr, "code=UNAUTHENTICATED")
			assert.Contains(t, res.Stderr, "the OpenBao token file "+b.Cfg.TokenPath()+" is corrupt")
			assert.Contains(t, res.Stderr, "place a fresh bootstrap grant at "+b.Cfg.BootstrapGrant+" and run `monky-deployd bootstrap`")
			assert.NotContains(t, res.Stderr, "invalid header field value")
		}
		assert.Empty(t, b.Stack.Bao.Requests(), "the corrupt token is never sent")
		assert.Empty(t, b.Stack.Tenancy.Requests())
	})
}

// TestBinaryBootstrap: bootstrap with a grant of another env is refused before the
// login and keeps the grant (it was consumed, then latched); on a bootstrapped box it
// says so, exits 0 and consumes nothing, unless --force.
func TestBinaryBootstrap(t *testing.T) {
	t.Run("grant of another env", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		grant := b.Stack.Bao.MintGrant("env-dev-02")
		require.NoError(t, os.WriteFile(b.Cfg.BootstrapGrant, []byte(grant+"\n"), 0o600))
		res := b.run([]string{"bootstrap", "--config", b.CfgPath})
		assert.Equal(t, deployd.ExitFailed, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, "code=UNAUTHENTICATED")
		assert.Contains(t, res.Stderr, "is for env env-dev-02, and this box is env-dev-01")
		assert.NotContains(t, res.Stderr, "consumed the grant")
		assert.NotContains(t, res.Stderr, grant)
		kept, err := os.ReadFile(b.Cfg.BootstrapGrant)
		require.NoError(t, err)
		assert.Equal(t, grant+"\n", string(kept), "the grant is kept")
		assert.Zero(t, countBao(b, "/login"))
		res = b.tick()
		assert.Equal(t, deployd.ExitFailed, res.Code, "not latched: %s", res.Stderr)
	})

	t.Run("already bootstrapped", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		b.SetDesired(faketenancy.Desired{Action: "none"})
		require.Equal(t, 0, b.tick().Code)
		// Without a grant: it says the box is bootstrapped, not that there is no token.
		res := b.run([]string{"bootstrap", "--config", b.CfgPath})
		assert.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, "already bootstrapped")
		assert.NotContains(t, res.Stderr, "no token")
		assert.NotContains(t, res.Stderr, "bootstrap confirmed by a check-in")

		grant := b.PlaceGrant()
		logins := countBao(b, "/login")
		res = b.run([]string{"bootstrap", "--config", b.CfgPath})
		assert.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, "already bootstrapped")
		assert.Equal(t, logins, countBao(b, "/login"))
		kept, err := os.ReadFile(b.Cfg.BootstrapGrant)
		require.NoError(t, err)
		assert.Equal(t, grant+"\n", string(kept), "the grant is not consumed")

		res = b.run([]string{"bootstrap", "--config", b.CfgPath, "--force"})
		assert.Equal(t, 0, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, "bootstrap confirmed by a check-in")
		assert.Equal(t, logins+1, countBao(b, "/login"))
		_, err = os.Stat(b.Cfg.BootstrapGrant)
		assert.ErrorIs(t, err, os.ErrNotExist, "consumed with --force")
	})
}
