package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

var (
	// ErrNotRegular is matched (errors.Is) by the *RefusedError of a fifo, a
	// directory, a device, a socket given to ReadRegular.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is matched (errors.Is) by the *RefusedError of a file that holds
	// more than ReadRegular's bound.
	ErrTooLarge = errors.New("file too large")
)

// RefusedError is a file ReadRegular refused without reading it: one that is not a
// regular file after symlinks (Err is ErrNotRegular) or one larger than the bound it
// was read with (Err is ErrTooLarge).
type RefusedError struct {
	// Path is the path as given.
	Path string
	// Err is ErrNotRegular or ErrTooLarge.
	Err error
	// Why says what is wrong, without the path: "a fifo, not a regular file" (the kind
	// is KindOf's), "larger than 1048576 bytes".
	Why string
}

// Error returns "<path> is <why>".
func (e *RefusedError) Error() string { return e.Path + " is " + e.Why }

// Unwrap returns ErrNotRegular or ErrTooLarge.
func (e *RefusedError) Unwrap() error { return e.Err }

// notRegular is the refusal of path, whose mode m is not a regular file's.
func notRegular(path string, m fs.FileMode) error {
	return &RefusedError{Path: path, Err: ErrNotRegular, Why: "a " + KindOf(m) + ", not a regular file"}
}

// ReadRegular reads the regular file at path (symlinks followed), at most max bytes,
// and never blocks on what is not a regular file.
//
// The path is stat-ed first, so that a device or a socket is never opened; it is then
// opened with O_NONBLOCK (an open of a fifo without a writer returns at once instead
// of waiting for one) and the opened file is fstat-ed again, so that a path swapped
// between the two is refused too; the content is read through that descriptor. What
// is not a regular file is a *RefusedError naming the path and its kind (matching
// ErrNotRegular); a file of more than max bytes is a *RefusedError matching
// ErrTooLarge. Other errors are those of os.Stat, os.Open and read, which name the
// path; a missing file matches fs.ErrNotExist.
func ReadRegular(path string, max int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: PathCause(err)}
	}
	if int64(len(data)) > max {
		return nil, &RefusedError{Path: path, Err: ErrTooLarge, Why: fmt.Sprintf("larger than %d bytes", max)}
	}
	return data, nil
}

// openRegular opens path read-only without blocking and returns it only when the
// opened file is a regular file.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, notRegular(path, fi.Mode())
	}
	return f, nil
}

// KindOf names the type of a file that is not regular, for messages: "fifo",
// "directory", "socket", "character device", "block device", "symlink" or "irregular
// file". ReadRegular's errors and bundle.Pack's refusals name types with it.
func KindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "irregular file"
	}
}

// PathCause returns the cause of a *fs.PathError (the errno, so that errors.Is(err,
// fs.ErrNotExist) still holds), for a message that names the path once itself; any
// other error is returned as it is.
func PathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Problem says what is wrong with a file that ReadRegular refused, without its path
// (the caller names the path once): "cannot read: a fifo, not a regular file",
// "larger than 1048576 bytes", or "cannot read: " and the cause, e.g. "no such file or
// directory". The config, the CA file and the identity file are refused in these words.
func Problem(err error) string {
	var refused *RefusedError
	switch {
	case errors.As(err, &refused) && errors.Is(refused.Err, ErrTooLarge):
		return refused.Why
	case errors.As(err, &refused):
		return "cannot read: " + refused.Why
	default:
		return "cannot read: " + PathCause(err).Error()
	}
}
