package bao_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/bao"
)

// TestCAFileIsReadAsAConfigFile: bao.ca_file is read as tenancy.ca_file is, a regular
// file of bounded size; a fifo is refused at once (os.ReadFile would wait for a writer
// for ever) and a file too large is refused before it is parsed.
func TestCAFileIsReadAsAConfigFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ca.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	big := filepath.Join(dir, "big.pem")
	require.NoError(t, os.WriteFile(big, make([]byte, 4<<20+1), 0o600))
	for _, tc := range []struct{ path, detail string }{
		{fifo, "bao.ca_file: " + fifo + ": cannot read: a fifo, not a regular file"},
		{big, "bao.ca_file: " + big + ": larger than 4194304 bytes"},
		{filepath.Join(dir, "missing.pem"), "bao.ca_file: " + filepath.Join(dir, "missing.pem") + ": cannot read: no such file or directory"},
	} {
		start := time.Now()
		c, err := bao.New(bao.Config{Addr: "https://bao.internal", EnvID: env, CAFile: tc.path})
		assert.Less(t, time.Since(start), 5*time.Second, "refused at once")
		assert.Nil(t, c)
		require.ErrorIs(t, err, bao.ErrConfig)
		assert.Contains(t, err.Error(), tc.detail)
	}
}
