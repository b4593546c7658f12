package fsutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestMkdirModeIgnoresTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := MkdirMode(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
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
