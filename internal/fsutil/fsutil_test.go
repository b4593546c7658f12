package fsutil_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// helperEnv makes the re-executed test binary act as a lock helper instead of running
// the tests (see TestMain).
const helperEnv = "FSUTIL_TEST_LOCK_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "hold":
		// Take the lock, say so, hold it until stdin closes.
		l, err := fsutil.TryLock(os.Args[len(os.Args)-1])
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = l.Unlock()
		os.Exit(0)
	case "try":
		// Try the lock once and report how it went.
		l, err := fsutil.TryLock(os.Args[len(os.Args)-1])
		switch {
		case errors.Is(err, fsutil.ErrLocked):
			fmt.Println("ErrLocked")
			os.Exit(3)
		case err != nil:
			fmt.Println("error:", err)
			os.Exit(2)
		}
		_ = l.Unlock()
		fmt.Println("locked")
		os.Exit(0)
	}
	os.Exit(2)
}

// tempFiles lists the leftover temporary files in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// assertFile asserts that p holds want with mode perm.
func assertFile(t *testing.T, p, want string, perm fs.FileMode) {
	t.Helper()
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, perm, st.Mode().Perm())
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
}

func TestWriteFileAtomicPerms(t *testing.T) {
	// The umask is process-wide: this test does not run in parallel with the others.
	tests := []struct {
		name  string
		umask int
		perm  fs.FileMode
	}{
		{"0600 under umask 022", 0o022, 0o600},
		{"0644 under umask 077", 0o077, 0o644},
		{"0640 under umask 027", 0o027, 0o640},
		{"0755 under umask 0", 0, 0o755},
		{"0400 under umask 022", 0o022, 0o400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := syscall.Umask(tt.umask)
			defer syscall.Umask(old)
			dir := t.TempDir()
			p := filepath.Join(dir, "state.json")
			require.NoError(t, fsutil.WriteFileAtomic(p, []byte("old"), tt.perm))
			assertFile(t, p, "old", tt.perm)
			// Replacing an existing file with another mode yields the new content and
			// mode too, and leaves no temporary file.
			require.NoError(t, fsutil.WriteFileAtomic(p, []byte("new content"), 0o600))
			assertFile(t, p, "new content", 0o600)
			assert.Empty(t, tempFiles(t, dir))
		})
	}
}

func TestWriteAtomicFailureKeepsOld(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		write  func(w io.Writer) error
		panics bool
	}{
		{"error before writing", func(io.Writer) error { return boom }, false},
		{"error after a partial write", func(w io.Writer) error {
			_, _ = io.WriteString(w, "half of the new cont")
			return boom
		}, false},
		{"panic after a partial write", func(w io.Writer) error {
			_, _ = io.WriteString(w, "partial")
			panic("boom")
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f")
			require.NoError(t, os.WriteFile(p, []byte("old"), 0o644))
			if tt.panics {
				assert.Panics(t, func() { _ = fsutil.WriteAtomic(p, 0o600, tt.write) })
			} else {
				err := fsutil.WriteAtomic(p, 0o600, tt.write)
				require.ErrorIs(t, err, boom)
				assert.Contains(t, err.Error(), p)
			}
			assertFile(t, p, "old", 0o644) // old content and mode untouched
			assert.Empty(t, tempFiles(t, dir))
		})
	}
}

func TestWriteFileAtomicReplacesSymlinkItself(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	require.NoError(t, os.WriteFile(target, []byte("target"), 0o600))
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, fsutil.WriteFileAtomic(link, []byte("new"), 0o600))
	st, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, st.Mode().IsRegular())
	assertFile(t, target, "target", 0o600)
}

func TestWriteAtomicStreams(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	err := fsutil.WriteAtomic(p, 0o600, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		for i := range 1000 {
			if _, err := fmt.Fprintf(bw, "line %d\n", i); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
	require.NoError(t, err)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, 1000, strings.Count(string(got), "\n"))
	assert.True(t, strings.HasSuffix(string(got), "line 999\n"))
}

func TestWriteFileAtomicErrors(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing directory", func(t *testing.T) {
		err := fsutil.WriteFileAtomic(filepath.Join(dir, "nope", "f"), []byte("x"), 0o600)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("destination is a directory", func(t *testing.T) {
		sub := filepath.Join(dir, "sub")
		require.NoError(t, os.Mkdir(sub, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(sub, "keep"), []byte("k"), 0o600))
		err := fsutil.WriteFileAtomic(sub, []byte("x"), 0o600)
		require.Error(t, err)
		assert.Empty(t, tempFiles(t, dir))
		assert.DirExists(t, sub)
	})
}

func TestSyncDir(t *testing.T) {
	require.NoError(t, fsutil.SyncDir(t.TempDir()))
	require.ErrorIs(t, fsutil.SyncDir(filepath.Join(t.TempDir(), "missing")), fs.ErrNotExist)
}

func TestTryLockSameProcess(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	l, err := fsutil.TryLock(p)
	require.NoError(t, err)
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	assert.Equal(t, p, l.Path())

	// flock belongs to the open file description: a second open in the same process
	// does not share the lock.
	_, err = fsutil.TryLock(p)
	require.ErrorIs(t, err, fsutil.ErrLocked)
	assert.Contains(t, err.Error(), p)

	require.NoError(t, l.Unlock())
	require.NoError(t, l.Unlock(), "second unlock is a no-op")

	l2, err := fsutil.TryLock(p)
	require.NoError(t, err)
	require.NoError(t, l2.Unlock())

	_, err = fsutil.TryLock(filepath.Join(t.TempDir(), "no", "lock"))
	require.ErrorIs(t, err, fs.ErrNotExist, "a missing directory")
	require.NotErrorIs(t, err, fsutil.ErrLocked)
}

func helper(t *testing.T, mode, path string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$", path)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

// holdElsewhere starts a helper process that takes the lock p and holds it until its
// stdin is closed; it returns once the helper holds it and TryLock here is refused.
func holdElsewhere(t *testing.T, p string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := helper(t, "hold", p)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)
	_, err = fsutil.TryLock(p)
	require.ErrorIs(t, err, fsutil.ErrLocked)
	return cmd, stdin
}

func TestTryLockOtherProcess(t *testing.T) {
	testprog.SkipIfShort(t) // spawns the test binary
	p := filepath.Join(t.TempDir(), "lock")

	t.Run("held here, tried there", func(t *testing.T) {
		l, err := fsutil.TryLock(p)
		require.NoError(t, err)
		out, err := helper(t, "try", p).Output()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, 3, ee.ExitCode())
		assert.Equal(t, "ErrLocked\n", string(out))

		require.NoError(t, l.Unlock())
		out, err = helper(t, "try", p).Output()
		require.NoError(t, err)
		assert.Equal(t, "locked\n", string(out))
	})

	t.Run("held there, tried here", func(t *testing.T) {
		cmd, stdin := holdElsewhere(t, p)
		require.NoError(t, stdin.Close())
		require.NoError(t, cmd.Wait())
		l, err := fsutil.TryLock(p)
		require.NoError(t, err)
		require.NoError(t, l.Unlock())
	})

	t.Run("released when the holder is killed", func(t *testing.T) {
		cmd, _ := holdElsewhere(t, p) // stdin kept open: the helper would hold forever
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		l, err := fsutil.TryLock(p)
		require.NoError(t, err)
		require.NoError(t, l.Unlock())
	})
}

func TestSwapSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "current")
	for _, rel := range []string{"a", "b"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "releases", rel), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "releases", rel, "id"), []byte(rel), 0o600))
	}

	// Creates the link, then swaps it for one to another release.
	for _, tc := range []struct{ name, target, id string }{
		{"creates", "releases/a", "a"},
		{"swaps", filepath.Join(dir, "releases", "b"), "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, fsutil.SwapSymlink(tc.target, link))
			got, err := os.Readlink(link)
			require.NoError(t, err)
			assert.Equal(t, tc.target, got)
			assertFile(t, filepath.Join(link, "id"), tc.id, 0o600)
			// The old target is untouched.
			assertFile(t, filepath.Join(dir, "releases", "a", "id"), "a", 0o600)
		})
	}
	t.Run("refuses to replace a directory", func(t *testing.T) {
		d := filepath.Join(dir, "realdir")
		require.NoError(t, os.Mkdir(d, 0o755))
		require.Error(t, fsutil.SwapSymlink("releases/a", d))
		assert.DirExists(t, d) // os.Lstat: the directory itself, not a link
	})
	assert.Empty(t, tempFiles(t, dir))
}

func TestFreeMB(t *testing.T) {
	mb, err := fsutil.FreeMB(t.TempDir())
	require.NoError(t, err)
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(os.TempDir(), &st))
	assert.GreaterOrEqual(t, mb, int64(0))
	// Within 64 MiB of an independent statfs (other processes write meanwhile).
	want := int64(st.Bavail * uint64(st.Bsize) >> 20)
	assert.InDelta(t, want, mb, 64)

	_, err = fsutil.FreeMB(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func ExampleWriteFileAtomic() {
	dir, _ := os.MkdirTemp("", "fsutil-example")
	defer func() { _ = os.RemoveAll(dir) }()
	p := filepath.Join(dir, "state.json")
	if err := fsutil.WriteFileAtomic(p, []byte(`{"serial":17}`), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	st, _ := os.Stat(p)
	b, _ := os.ReadFile(p)
	fmt.Println(st.Mode().Perm(), string(b))
	// Output: -rw------- {"serial":17}
}

func ExampleTryLock() {
	dir, _ := os.MkdirTemp("", "fsutil-example")
	defer func() { _ = os.RemoveAll(dir) }()
	p := filepath.Join(dir, "lock")
	l, _ := fsutil.TryLock(p)
	_, err := fsutil.TryLock(p)
	fmt.Println(errors.Is(err, fsutil.ErrLocked))
	_ = l.Unlock()
	// Output: true
}
