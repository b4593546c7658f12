//go:build unix

package fakedocker

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on path, creating it, and returns the unlock.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close() // the flock error is the one to report; the file is only a lock
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close() // closing releases the lock too; there is nothing to do on failure
	}, nil
}
