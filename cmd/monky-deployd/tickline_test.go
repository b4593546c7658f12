package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// tickLine finds the tick's own log line in stderr and returns its code attribute.
func tickLine(t *testing.T, stderr string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^.*msg="tick (?:done|failed|ended on a temporary condition[^"]*)".* code=(\S*) .*$`).FindStringSubmatch(stderr)
	require.NotNil(t, m, "no tick line in:\n%s", stderr)
	return m[1]
}

// TestTickLineCarriesTheCode: every tick line names its code, also when the tick
// stopped before it had an outcome (a held lock, an unusable state dir, the latch),
// and the config's error line carries CONFIG_INVALID.
func TestTickLineCarriesTheCode(t *testing.T) {
	t.Run("lock held", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		l, err := fsutil.TryLock(b.Cfg.LockPath())
		require.NoError(t, err)
		defer func() { _ = l.Unlock() }()
		r := runMain(t, b.procEnv(), "run", "--config", b.CfgPath)
		require.Equal(t, deployd.ExitTemporary, r.Code, r.Stderr)
		assert.Equal(t, "LOCKED", tickLine(t, r.Stderr))
	})
	t.Run("state dir unusable", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		require.NoError(t, os.WriteFile(b.Cfg.StateDir, nil, 0o600)) // a file where the dir goes
		r := runMain(t, b.procEnv(), "run", "--config", b.CfgPath)
		require.Equal(t, deployd.ExitFailed, r.Code, r.Stderr)
		assert.Equal(t, "STATE_UNAVAILABLE", tickLine(t, r.Stderr))
	})
	t.Run("latched", func(t *testing.T) {
		b := newBox(t, boxOpts{noGrant: true})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(b.foreignToken("env-dev-02")+"\n"), 0o600))
		for range 2 { // the tick that latches, and one that only reads the latch
			r := runMain(t, b.procEnv(), "run", "--config", b.CfgPath)
			require.Equal(t, deployd.ExitEnvMismatch, r.Code, r.Stderr)
			assert.Equal(t, "AGENT_ENV_MISMATCH", tickLine(t, r.Stderr))
		}
	})
	t.Run("applied", func(t *testing.T) {
		b := newBox(t, boxOpts{})
		r := runMain(t, b.procEnv(), "run", "--config", b.CfgPath)
		require.Equal(t, deployd.ExitOK, r.Code, r.Stderr)
		assert.Equal(t, `""`, tickLine(t, r.Stderr), "a tick that did its job has no code")
	})
	t.Run("bad config", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(p, []byte("env_id: production\n"), 0o600))
		for _, cmd := range []string{"run", "status", "bootstrap"} {
			r := runMain(t, nil, cmd, "--config", p)
			require.Equal(t, deployd.ExitFailed, r.Code, r.Stderr)
			assert.Regexp(t, `msg="the config is invalid; fix it and run again" .*code=CONFIG_INVALID`, r.Stderr, cmd)
		}
	})
}
