package bundle

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
)

// File and directory modes of an extracted release. Modes in the tar are ignored:
// no setuid, setgid, sticky or world-writable bit, and no executable file, ever
// reaches a release.
const (
	FileMode os.FileMode = 0o644
	DirMode  os.FileMode = 0o755
)

// Extract unpacks the bundle stream r into dir, an existing empty staging
// directory, and checks that the bundle sha of what it wrote is wantSHA.
//
// It writes regular files (mode FileMode) and directories (mode DirMode) only, and
// refuses, as Verify does, every unsafe path, non-regular entry, duplicate and
// limit: the error is a *RefusedError (MANIFEST_PATHS, BUNDLE_MALFORMED) and
// extraction stops at the first refusal. Nothing is written outside dir: every path
// is opened beneath dir through os.Root, new files are created with O_EXCL and
// O_NOFOLLOW, and no symlink is ever followed. The sha is recomputed from the bytes
// written; a difference is a *RefusedError with SHA_MISMATCH. Every file and
// directory is fsynced before Extract returns nil.
//
// On any error dir holds a partial release: the caller removes it (it is a staging
// directory, never the live release). wantSHA is required.
func Extract(ctx context.Context, r io.Reader, dir string, wantSHA string, lim Limits) error {
	want := strings.ToLower(wantSHA)
	if !ids.ValidSHA(want) {
		return fmt.Errorf("%w: Extract needs the expected sha (64 hex digits)", ErrInvalidArgument)
	}
	if err := checkEmptyDir(dir); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("bundle: opening %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	x := &extractor{root: root, made: map[string]bool{".": true}}
	res, err := scan(ctx, r, lim, scanOpts{strict: true, file: x.file, dir: x.mkdir})
	if err != nil {
		return err
	}
	if rs := res.rs.result(); len(rs) > 0 {
		return &RefusedError{Refusals: rs}
	}
	got := listingSHA(res.files)
	if got != want {
		return &RefusedError{SHA: got, Refusals: []Refusal{{codes.SHAMismatch,
			fmt.Sprintf("the extracted bundle's sha is %s, expected %s", got, want)}}}
	}
	return x.syncDirs()
}

func checkEmptyDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("bundle: staging directory: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("bundle: staging directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: staging directory %s is not a directory", ErrInvalidArgument, dir)
	}
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("bundle: staging directory: %w", err)
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: staging directory %s is not empty", ErrInvalidArgument, dir)
	}
	return nil
}

type extractor struct {
	root *os.Root
	made map[string]bool // directories created (or dir itself, ".")
}

// mkdir creates name and its parents beneath the root with DirMode.
func (x *extractor) mkdir(name string) error {
	if x.made[name] {
		return nil
	}
	if parent := path.Dir(name); !x.made[parent] {
		if err := x.mkdir(parent); err != nil {
			return err
		}
	}
	if err := x.root.Mkdir(name, DirMode); err != nil {
		return &callerError{fmt.Errorf("bundle: creating directory %q: %w", name, err)}
	}
	if err := x.root.Chmod(name, DirMode); err != nil { // the umask is not ours to trust
		return &callerError{fmt.Errorf("bundle: creating directory %q: %w", name, err)}
	}
	x.made[name] = true
	return nil
}

// fileWriter marks errors of the destination file, so that they are not mistaken
// for a broken stream.
type fileWriter struct {
	f    *os.File
	name string
}

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		return n, &callerError{fmt.Errorf("bundle: writing %q: %w", w.name, err)}
	}
	return n, nil
}

func (x *extractor) file(name string, _ int64, r io.Reader, h hash.Hash, buf []byte) error {
	if err := x.mkdir(path.Dir(name)); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, FileMode)
	if err != nil {
		return &callerError{fmt.Errorf("bundle: creating %q: %w", name, err)}
	}
	defer func() { _ = f.Close() }()
	if _, err := io.CopyBuffer(io.MultiWriter(&fileWriter{f: f, name: name}, h), onlyReader{r}, buf); err != nil {
		return err
	}
	if err := f.Chmod(FileMode); err != nil {
		return &callerError{fmt.Errorf("bundle: chmod %q: %w", name, err)}
	}
	if err := f.Sync(); err != nil {
		return &callerError{fmt.Errorf("bundle: fsync %q: %w", name, err)}
	}
	if err := f.Close(); err != nil {
		return &callerError{fmt.Errorf("bundle: closing %q: %w", name, err)}
	}
	return nil
}

// onlyReader hides any WriterTo of the tar reader so that CopyBuffer uses buf.
type onlyReader struct{ io.Reader }

// syncDirs fsyncs every directory created, deepest first, then dir itself.
func (x *extractor) syncDirs() error {
	dirs := make([]string, 0, len(x.made))
	for d := range x.made {
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	slices.SortStableFunc(dirs, func(a, b string) int {
		if a == "." {
			return 1
		}
		if b == "." {
			return -1
		}
		return 0
	})
	for _, d := range dirs {
		f, err := x.root.Open(d)
		if err != nil {
			return fmt.Errorf("bundle: fsync directory %q: %w", d, err)
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("bundle: fsync directory %q: %w", d, err)
		}
	}
	return nil
}
