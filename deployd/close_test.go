package deployd_test

import (
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
)

// idleCounter is a transport that counts CloseIdleConnections.
type idleCounter struct {
	http.RoundTripper
	closed atomic.Int32
}

func (c *idleCounter) CloseIdleConnections() { c.closed.Add(1) }

// TestCloseReleasesOpenBaoConnections: Close also closes the idle connections to
// OpenBao (found by the soak: a closed agent left an fd and two goroutines behind
// for the 90 s idle timeout).
func TestCloseReleasesOpenBaoConnections(t *testing.T) {
	dir := t.TempDir()
	cfg := deployd.DefaultConfig()
	cfg.EnvID = "env-dev-01"
	cfg.DeployDir, cfg.StateDir = filepath.Join(dir, "srv"), filepath.Join(dir, "state")
	cfg.BootstrapGrant = filepath.Join(dir, "grant.jwt")
	cfg.Tenancy.Transport, cfg.Tenancy.URL = "system", "http://127.0.0.1:1"
	cfg.Bao.Addr = "http://127.0.0.1:2"
	tr := &idleCounter{RoundTripper: http.DefaultTransport}
	a, err := deployd.New(t.Context(), cfg, deployd.Options{BaoHTTP: &http.Client{Transport: tr}})
	require.NoError(t, err)
	require.NoError(t, a.Close())
	assert.EqualValues(t, 1, tr.closed.Load())
}
