package fsutil

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// ErrLocked is returned (wrapped) by TryLock when another open file description, in this
// or another process, holds the lock.
var ErrLocked = errors.New("lock held by another run")

// Lock is an exclusive flock(2) on a file. It is released by Unlock or, whatever happens,
// when the process exits. A Lock is safe for concurrent use.
type Lock struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// TryLock opens path (creating it with mode 0600 if it is missing) and takes an exclusive
// flock on it without waiting. If the lock is held elsewhere the error wraps ErrLocked.
func TryLock(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fsutil: lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("fsutil: lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("fsutil: lock %s: %w", path, &os.PathError{Op: "flock", Path: path, Err: err})
	}
	return &Lock{path: path, f: f}, nil
}

// Path returns the path of the lock file.
func (l *Lock) Path() string { return l.path }

// Unlock releases the lock and closes the file. The lock file itself stays in place (a
// removal would race with a process that has just opened it). Unlocking twice is a no-op.
func (l *Lock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsutil: unlock %s: %w", l.path, err)
	}
	return nil
}
