package transport

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/golden"
	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

func TestCAFileErrors(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "ca", "*.pem"))
	require.NoError(t, err)
	require.NotEmpty(t, fixtures)
	for _, p := range fixtures {
		name := strings.TrimSuffix(filepath.Base(p), ".pem")
		t.Run(name, func(t *testing.T) {
			_, err := New(t.Context(), Config{Transport: TransportSystem, URL: "https://t", CAFile: p})
			require.ErrorIs(t, err, ErrCAFile)
			msg := err.Error()
			assert.Contains(t, msg, "tenancy.ca_file")
			assert.Contains(t, msg, p)
			assert.NotContains(t, msg, "S0VZTUFURVJJQUx") // the private key block's content
			golden.Assert(t, "ca/"+name+".golden", []byte(strings.ReplaceAll(msg, p, "<path>")+"\n"))
		})
	}

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
