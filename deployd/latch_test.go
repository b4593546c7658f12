package deployd_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
)

// TestFailedBootstrapKeepsTheLatch: only a bootstrap that succeeds clears the
// AGENT_ENV_MISMATCH latch; a bootstrap without a grant leaves later runs at 78
// without the network.
func TestFailedBootstrapKeepsTheLatch(t *testing.T) {
	b := newBox(t, boxOptions{})
	// The box holds a token of another env.
	require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), []byte(b.Stack.Token("env-dev-02")), 0o600))
	require.NoError(t, os.Remove(b.Cfg.BootstrapGrant))
	_, code := b.tick()
	require.Equal(t, deployd.ExitEnvMismatch, code)
	require.NotNil(t, b.State().EnvMismatch)

	// No grant: the bootstrap fails, and the latch stays.
	_, err := b.agent.Bootstrap(t.Context(), "")
	require.Error(t, err)
	assert.NotNil(t, b.State().EnvMismatch, "a failed bootstrap must not clear the latch")
	before, beforeBao := len(b.Stack.Requests()), len(b.Stack.BaoRequests())
	_, code = b.tick()
	assert.Equal(t, deployd.ExitEnvMismatch, code)
	assert.Len(t, b.Stack.Requests(), before, "a latched run touches no network")
	assert.Len(t, b.Stack.BaoRequests(), beforeBao)
}
