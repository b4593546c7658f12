package fsutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// tempName returns a fresh temporary name in the directory of path:
// "<dir>/.<base>.tmp-<16 hex>".
func tempName(path string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("fsutil: random temp name for %s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(b[:])), nil
}

// WriteFileAtomic replaces the file at path with data, atomically, with mode perm.
//
// The data is written to a temporary file in the same directory that is created with
// O_EXCL and perm and then chmod-ed to perm (so the umask does not matter), fsync-ed and
// renamed over path; finally the directory is fsync-ed. On any error before the rename
// the temporary file is removed and the old file at path is untouched. If path is a
// symlink, the link itself is replaced by the new file, not its target.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic is WriteFileAtomic for content produced by a function: write receives the
// temporary file and streams the content into it. An error from write aborts the
// replacement: the temporary file is removed, the old file at path is untouched and the
// error is returned wrapped. A panic in write removes the temporary file too.
func WriteAtomic(path string, perm fs.FileMode, write func(w io.Writer) error) (err error) {
	var (
		f   *os.File
		tmp string
	)
	for range 10 {
		tmp, err = tempName(path)
		if err != nil {
			return err
		}
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, perm.Perm())
		if err == nil || !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("fsutil: write %s: %w", path, err)
	}
	renamed := false
	defer func() {
		if !renamed { // an error or a panic in write: leave no temporary file behind
			_ = f.Close() // a second Close after a successful one is harmless
			_ = os.Remove(tmp)
		}
	}()
	// The create honoured the umask; set the mode the caller asked for exactly.
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("fsutil: write %s: %w", path, err)
	}
	if err = write(f); err != nil {
		return fmt.Errorf("fsutil: write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsutil: write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("fsutil: write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("fsutil: write %s: %w", path, err)
	}
	renamed = true
	// The new content is in place; a failing directory sync is still reported, because
	// the rename may not survive a power loss.
	if serr := SyncDir(filepath.Dir(path)); serr != nil {
		return fmt.Errorf("fsutil: write %s: %w", path, serr)
	}
	return nil
}

// SyncDir fsyncs the directory dir, so that a rename, a create or a removal of one of its
// entries survives a power loss.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsutil: sync dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsutil: sync dir %s: %w", dir, err)
	}
	return nil
}

// SwapSymlink points link at target atomically: it creates a symlink to target under a
// temporary name in the directory of link, renames it over link and fsyncs the directory.
// Readers see either the old or the new target, never a missing link. link may not exist
// yet; if it exists it must be a symlink or a file (a directory is refused by rename(2)).
// target is stored as given (a relative target is relative to the link's directory).
func SwapSymlink(target, link string) (err error) {
	var tmp string
	for range 10 {
		tmp, err = tempName(link)
		if err != nil {
			return err
		}
		err = os.Symlink(target, tmp)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("fsutil: swap symlink %s: %w", link, err)
	}
	if err = os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsutil: swap symlink %s: %w", link, err)
	}
	if err = SyncDir(filepath.Dir(link)); err != nil {
		return fmt.Errorf("fsutil: swap symlink %s: %w", link, err)
	}
	return nil
}

// FreeMB returns the space available to unprivileged users on the file system that
// holds path, in MiB (rounded down). path must exist.
func FreeMB(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("fsutil: free space of %s: %w", path, &fs.PathError{Op: "statfs", Path: path, Err: err})
	}
	return int64(st.Bavail * uint64(st.Bsize) / (1 << 20)), nil
}
