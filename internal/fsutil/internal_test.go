package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpenRegularFstat: the check after the open, on the opened file, holds on its
// own: a path swapped for a fifo between the stat and the open is neither waited on
// nor read.
func TestOpenRegularFstat(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "grant.jwt")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() {
		f, err := openRegular(fifo)
		if err == nil {
			_ = f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		var nr *RefusedError
		if !errors.As(err, &nr) || nr.Why != "a fifo, not a regular file" || nr.Path != fifo || !errors.Is(nr.Err, ErrNotRegular) {
			t.Fatalf("openRegular(fifo) = %v, want a RefusedError of a fifo naming %s", err, fifo)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("openRegular blocks on a fifo without a writer")
	}

	reg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(reg, []byte("env_id: env-dev-01\n"), 0o600))
	f, err := openRegular(reg)
	require.NoError(t, err, "openRegular(regular file)")
	_ = f.Close()
}

func TestMkdirModeIgnoresTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, MkdirMode(dir, 0o755))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	if got := fi.Mode().Perm(); got != 0o755 {
		t.Fatalf("mode %v, want 0755", got)
	}
}

func TestExistingParent(t *testing.T) {
	base := t.TempDir()
	for _, tt := range []struct{ in, want string }{
		{base, base},
		{filepath.Join(base, "x", "y"), base},
		{"/", "/"},
	} {
		if got := ExistingParent(tt.in); got != tt.want {
			t.Errorf("ExistingParent(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
