package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenRegularFstat: the check after the open, on the opened file, holds on its
// own: a path swapped for a fifo between the stat and the open is neither waited on
// nor read.
func TestOpenRegularFstat(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "grant.jwt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
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
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.Kind != "fifo" || nr.Path != fifo {
			t.Fatalf("openRegular(fifo) = %v, want a NotRegularError of kind fifo naming %s", err, fifo)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("openRegular blocks on a fifo without a writer")
	}

	reg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(reg, []byte("env_id: env-dev-01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openRegular(reg)
	if err != nil {
		t.Fatalf("openRegular(regular file): %v", err)
	}
	_ = f.Close()
}
