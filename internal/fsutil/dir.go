package fsutil

import (
	"os"
	"path/filepath"
)

// MkdirMode creates dir (and its parents) and gives dir itself mode perm, whatever the
// process umask.
func MkdirMode(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	return os.Chmod(dir, perm)
}

// ExistingParent is p or its nearest ancestor that exists (the root at worst): the
// directory whose file system a path not yet created will be on.
func ExistingParent(p string) string {
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}
