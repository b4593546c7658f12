package deployd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/fsutil"
)

// TestReadTokenFileCorrupt: what a crash or a disk can leave in bao.token is known as
// corrupt when read (never sent as a bearer), with why and the path, and never with
// what the file holds.
func TestReadTokenFileCorrupt(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		data []byte
		why  string
	}{
		"nul":       {make([]byte, 96), "not printable ASCII"},
		"inner nul": {[]byte("hvs.CAESIJ\x00\x00\x00\n"), "not printable ASCII"},
		"binary":    {[]byte("hvs.abc\xff\xfedef"), "not printable ASCII"},
		"tab":       {[]byte("hvs.abc\tdef"), "not printable ASCII"},
		"empty":     {nil, "empty"},
		"blank":     {[]byte(" \r\n\t\n"), "empty"},
		"too long":  {[]byte(strings.Repeat("a", maxTokenFile+1)), "larger than 4096 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			require.NoError(t, os.WriteFile(p, tc.data, 0o600))
			tok, err := readTokenFile(p)
			require.Error(t, err)
			assert.Empty(t, tok)
			assert.ErrorIs(t, err, ErrTokenCorrupt)
			assert.Equal(t, "the OpenBao token file "+p+" is corrupt ("+tc.why+")", err.Error())
		})
	}
	t.Run("longest", func(t *testing.T) {
		p := filepath.Join(dir, "longest")
		long := "hvb." + strings.Repeat("A", maxTokenFile-5)
		require.NoError(t, os.WriteFile(p, []byte(long+"\n"), 0o600))
		tok, err := readTokenFile(p)
		require.NoError(t, err)
		assert.Equal(t, long, tok)
	})
}

// TestReadTokenFileNotRegular: a token path that is a fifo or a directory is an error
// naming it, at once; it is not a corrupt token (nothing to bootstrap over).
func TestReadTokenFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "bao.token")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err := readTokenFile(fifo)
	require.Error(t, err)
	assert.ErrorIs(t, err, fsutil.ErrNotRegular)
	assert.False(t, errors.Is(err, ErrTokenCorrupt))
	assert.Contains(t, err.Error(), fifo+" is a fifo, not a regular file")
}
