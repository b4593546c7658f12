package fsutil_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/fsutil"
)

// readWithin runs ReadRegular(p, max) and fails the test if it does not return within
// five seconds: no read of a file the agent is handed may hang.
func readWithin(t *testing.T, p string, max int64) ([]byte, error) {
	t.Helper()
	type res struct {
		data []byte
		err  error
	}
	done := make(chan res, 1)
	go func() {
		data, err := fsutil.ReadRegular(p, max)
		done <- res{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("ReadRegular(%s) hangs", p)
		return nil, nil
	}
}

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(p, []byte("0123456789"), 0o600))

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(p, link))
	for _, tc := range []struct {
		name, path string
		max        int64
		want       string
	}{
		{"exactly max bytes are read", p, 10, "0123456789"},
		{"under max", p, 64, "0123456789"},
		{"empty", empty, 64, ""},
		{"a symlink to a regular file is read", link, 64, "0123456789"},
	} {
		data, err := readWithin(t, tc.path, tc.max)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, string(data), tc.name)
	}
}

func TestReadRegularTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte("01234567890"), 0o600))
	data, err := readWithin(t, p, 10)
	require.Error(t, err)
	assert.Nil(t, data)
	assert.ErrorIs(t, err, fsutil.ErrTooLarge)
	var tl *fsutil.RefusedError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, p, tl.Path)
	assert.Equal(t, "larger than 10 bytes", tl.Why)
	assert.Equal(t, p+" is larger than 10 bytes", err.Error())
	assert.Equal(t, "larger than 10 bytes", fsutil.Problem(err))
}

func TestReadRegularMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope")
	_, err := readWithin(t, p, 10)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, fsutil.ErrNotRegular)
	assert.Contains(t, err.Error(), p)
	assert.Equal(t, "cannot read: no such file or directory", fsutil.Problem(err), "the path is the caller's to name")
}

// TestReadRegularRefusesOtherKinds: a fifo (nobody writing: a blocking open or read
// would hang; or one whose writer never stops), a directory, a socket, a device, and a symlink to one of them are
// refused at once, with the path and what it is.
func TestReadRegularRefusesOtherKinds(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "grant.jwt")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	sub := filepath.Join(dir, "bao.token")
	require.NoError(t, os.Mkdir(sub, 0o700))
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	fifoLink := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.Symlink(fifo, fifoLink))
	// A fifo with a writer that never stops is refused as well, without reading from
	// it. O_RDWR on a fifo does not block on Linux; the writer keeps it open.
	busy := filepath.Join(dir, "state.json")
	require.NoError(t, syscall.Mkfifo(busy, 0o600))
	w, err := os.OpenFile(busy, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	_, err = w.Write([]byte(strings.Repeat("x", 100)))
	require.NoError(t, err)

	for _, tc := range []struct {
		path, kind string
	}{
		{fifo, "fifo"},
		{fifoLink, "fifo"},
		{busy, "fifo"},
		{sub, "directory"},
		{sock, "socket"},
		{"/dev/null", "character device"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			data, err := readWithin(t, tc.path, 1<<20)
			require.Error(t, err)
			assert.Nil(t, data)
			assert.ErrorIs(t, err, fsutil.ErrNotRegular)
			var nr *fsutil.RefusedError
			require.ErrorAs(t, err, &nr)
			assert.Equal(t, tc.path, nr.Path)
			assert.Equal(t, "a "+tc.kind+", not a regular file", nr.Why)
			assert.Equal(t, tc.path+" is a "+tc.kind+", not a regular file", err.Error())
			assert.Equal(t, "cannot read: a "+tc.kind+", not a regular file", fsutil.Problem(err))
			assert.False(t, errors.Is(err, fs.ErrNotExist))
		})
	}
}
