package transport

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

func TestCAFileErrors(t *testing.T) {
	// S0VZTUFURVJJQUx is the content of a fixture's private key block.
	transporttest.FileErrors(t, "ca", ".pem", ErrCAFile, "tenancy.ca_file", "S0VZTUFURVJJQUx", func(t *testing.T, p string) error {
		_, err := New(t.Context(), Config{Transport: TransportSystem, URL: "https://t", CAFile: p})
		return err
	})

	t.Run("missing file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "nope.pem")
		_, err := New(t.Context(), Config{Transport: TransportSystem, URL: "https://t", CAFile: p})
		require.ErrorIs(t, err, ErrCAFile)
		require.ErrorIs(t, err, fs.ErrNotExist)
		assert.Equal(t, "transport: tenancy.ca_file "+p+": cannot read: no such file or directory", err.Error())
	})

	t.Run("a directory", func(t *testing.T) {
		p := t.TempDir()
		_, err := New(t.Context(), Config{Transport: TransportSystem, URL: "https://t", CAFile: p})
		require.ErrorIs(t, err, ErrCAFile)
		assert.Equal(t, "transport: tenancy.ca_file "+p+": cannot read: a directory, not a regular file", err.Error())
	})

	t.Run("a fifo is refused at once, not waited on", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		_, err := New(t.Context(), Config{Transport: TransportSystem, URL: "https://t", CAFile: p})
		require.ErrorIs(t, err, ErrCAFile)
		assert.Equal(t, "transport: tenancy.ca_file "+p+": cannot read: a fifo, not a regular file", err.Error())
	})

	t.Run("too large", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(p, make([]byte, maxCAFileSize+1), 0o600))
		_, err := New(t.Context(), Config{Transport: TransportSystem, URL: "https://t", CAFile: p})
		require.ErrorIs(t, err, ErrCAFile)
		assert.Equal(t, fmt.Sprintf("transport: tenancy.ca_file %s: larger than %d bytes", p, maxCAFileSize), err.Error())
	})

	t.Run("a bundle with comments and two certificates", func(t *testing.T) {
		a, b := transporttest.NewCA(t), transporttest.NewCA(t)
		data := append([]byte("# monky CA bundle\n"), a.PEM...)
		data = append(data, []byte("\nsecond one:\n")...)
		data = append(data, b.PEM...)
		certs, err := parseCABundle(data)
		require.NoError(t, err)
		assert.Len(t, certs, 2)
	})
}
