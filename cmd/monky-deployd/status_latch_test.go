package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/internal/testbox"
)

// TestStatusLatchOfAnotherEnv: once env_id has changed in the config, the latch in the
// state no longer holds (the next run clears it and checks in), and status must not
// tell the operator that runs exit 78.
func TestStatusLatchOfAnotherEnv(t *testing.T) {
	testbox.SkipIfShort(t)
	b := newBox(t, boxOpts{noGrant: true})
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(b.foreignToken("env-dev-02")+"\n"), 0o600))
	res := b.tick()
	require.Equal(t, deployd.ExitEnvMismatch, res.Code, res.Stderr)

	b.Configure(func(c *deployd.Config) { c.EnvID = "env-dev-02" })

	r := runMain(t, b.procEnv(), "status", "--config", b.CfgPath)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.NotContains(t, r.Stdout, "runs exit 78")
	assert.Regexp(t, `(?m)^latch:\s+none \(the AGENT_ENV_MISMATCH latch of env-dev-01 clears at the next run: env_id changed\)$`, r.Stdout)
}
