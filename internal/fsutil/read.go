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
	// ErrNotRegular is matched (errors.Is) by a *NotRegularError: ReadRegular was
	// given a fifo, a directory, a device, a socket.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is matched (errors.Is) by a *TooLargeError: the file holds more
	// than ReadRegular's bound.
	ErrTooLarge = errors.New("file too large")
)

// NotRegularError is a path that is not a regular file (after symlinks).
type NotRegularError struct {
	// Path is the path as given.
	Path string
	// Kind is what it is: "fifo", "directory", "socket", "character device",
	// "block device", "irregular file".
	Kind string
}

// Error returns "<path> is a <kind>, not a regular file".
func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is a %s, not a regular file", e.Path, e.Kind)
}

// Is reports whether target is ErrNotRegular.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// TooLargeError is a file larger than the bound it was read with.
type TooLargeError struct {
	Path string
	Max  int64
}

// Error returns "<path> is larger than <max> bytes".
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", e.Path, e.Max)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ReadRegular reads the regular file at path (symlinks followed), at most max bytes,
// and never blocks on what is not a regular file.
//
// The path is stat-ed first, so that a device or a socket is never opened; it is then
// opened with O_NONBLOCK (an open of a fifo without a writer returns at once instead
// of waiting for one) and the opened file is fstat-ed again, so that a path swapped
// between the two is refused too; the content is read through that descriptor. What
// is not a regular file is a *NotRegularError naming the path and its kind (matching
// ErrNotRegular); a file of more than max bytes is a *TooLargeError (matching
// ErrTooLarge). Other errors are those of os.Stat, os.Open and read, which name the
// path; a missing file matches fs.ErrNotExist.
func ReadRegular(path string, max int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Kind: KindOf(fi.Mode())}
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
		return nil, &TooLargeError{Path: path, Max: max}
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
		return nil, &NotRegularError{Path: path, Kind: KindOf(fi.Mode())}
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
	var notRegular *NotRegularError
	var tooLarge *TooLargeError
	switch {
	case errors.As(err, &notRegular):
		return "cannot read: a " + notRegular.Kind + ", not a regular file"
	case errors.As(err, &tooLarge):
		return fmt.Sprintf("larger than %d bytes", tooLarge.Max)
	default:
		return "cannot read: " + PathCause(err).Error()
	}
}
