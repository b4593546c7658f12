package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Space is what statfs says of the file system that holds a path: its free space
// available to unprivileged users, its block size and its inodes.
type Space struct {
	// FreeMB is the space available, in MiB (rounded down).
	FreeMB int64
	// Free is the space available, in bytes.
	Free int64
	// BlockSize is the file system's block size in bytes.
	BlockSize int64
	// FreeInodes and TotalInodes count inodes; TotalInodes is 0 on a file system
	// that does not count them.
	FreeInodes, TotalInodes int64
}

// SpaceOf returns the Space of the file system that holds path, which must exist.
func SpaceOf(path string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return Space{}, fmt.Errorf("fsutil: free space of %s: %w", path, &fs.PathError{Op: "statfs", Path: path, Err: err})
	}
	return Space{
		FreeMB:      int64(st.Bavail * uint64(st.Bsize) / (1 << 20)),
		Free:        int64(st.Bavail * uint64(st.Bsize)),
		BlockSize:   st.Bsize,
		FreeInodes:  int64(st.Ffree),
		TotalInodes: int64(st.Files),
	}, nil
}

// ProbeWrite proves that dir takes a file of n bytes: it writes one (fsynced, so that
// a full file system says so now) under a hidden name and removes it. The error
// wraps the system's (ENOSPC, EDQUOT, EROFS, EACCES) and names dir.
func ProbeWrite(dir string, n int) (err error) {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("fsutil: %s is not writable: %w", dir, err)
	}
	defer func() {
		if rerr := os.Remove(f.Name()); rerr != nil && err == nil {
			err = fmt.Errorf("fsutil: remove the probe in %s: %w", dir, rerr)
		}
	}()
	if err := reserve(f, n); err != nil {
		_ = f.Close() // the reservation's error is the one that says why
		return fmt.Errorf("fsutil: %s has no room for %d bytes: %w", dir, n, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync's error is the one that says why
		return fmt.Errorf("fsutil: %s has no room for %d bytes: %w", dir, n, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("fsutil: %s has no room for %d bytes: %w", dir, n, err)
	}
	return nil
}

// probeChunk is the zero block reserve writes where the file system cannot allocate:
// a probe allocates no more than this, however large.
var probeChunk [32 << 10]byte

// reserve makes f take n bytes of the file system: fallocate where it is supported,
// else writes of zeros.
func reserve(f *os.File, n int) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, int64(n))
	if err == nil || !errors.Is(err, syscall.EOPNOTSUPP) {
		return err
	}
	for n > 0 {
		k := min(n, len(probeChunk))
		if _, err := f.Write(probeChunk[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
