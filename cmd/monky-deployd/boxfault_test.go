package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestBinaryDockerSocketMissing: the shipped binary on a box whose docker socket is
// not there reports DOCKER_UNAVAILABLE before the lease, exits 1 and converges at
// the first tick once docker is back, with one lease and no retry from tenancy.
func TestBinaryDockerSocketMissing(t *testing.T) {
	b := newBox(t, boxOpts{})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 1))
	res := b.run([]string{"run", "--config", b.CfgPath}, "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "docker.sock"))
	assert.Equal(t, 1, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "code=DOCKER_UNAVAILABLE")
	assert.Contains(t, res.Stderr, "Start docker")
	assert.Zero(t, b.Leases())

	res = b.tick()
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Equal(t, sha, b.Live())
	assert.Equal(t, 1, b.Leases())
}

// TestBinaryFullDisks: deploy_dir and state_dir on small tmpfs mounts. A release of
// 2000 one-byte files passes a count of bytes but not of blocks: DISK_LOW before
// the lease. A state dir without room for the token: DISK_FULL before the lease.
// Once space is freed, the next tick applies with one lease. Needs root (mount).
func TestBinaryFullDisks(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts tmpfs and spawns the binary; run without -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; CI runs this test as root")
	}
	b := newBox(t, boxOpts{})
	b.Configure(func(c *deployd.Config) { c.MinFreeMB = 0 })
	require.Equal(t, 0, b.run([]string{"bootstrap", "--config", b.CfgPath}).Code)
	deployFiller := mountTmpfs(t, b.Cfg.DeployDir, 64<<20, 3<<20)
	mountTmpfs(t, b.Cfg.StateDir, 1<<20, -1)
	stateFiller := filepath.Join(b.Cfg.StateDir, "filler")

	spec := faketenancy.SampleApp(b.Env, 1)
	for i := range 2000 {
		spec.Files[fmt.Sprintf("conf/%02d/%d.txt", i%50, i)] = "x"
	}
	b.Publish(spec)
	res := b.tick()
	assert.Equal(t, 1, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "DISK_LOW")
	assert.Regexp(t, `DISK_LOW: [0-9] MiB free under deploy_dir, the release needs 1[6-9] MiB`, res.Stderr, "counted in blocks: 2000 blocks of 4 KiB, twice")
	assert.Zero(t, b.Leases(), "a full deploy dir costs no lease")

	require.NoError(t, os.Remove(deployFiller))
	fill(t, stateFiller, b.Cfg.StateDir, 128<<10)
	res = b.tick()
	assert.Equal(t, 1, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "code=DISK_FULL")
	assert.Contains(t, res.Stderr, b.Cfg.StateDir)
	assert.Zero(t, b.Leases(), "a full state dir costs no lease")
	assert.Empty(t, b.State().Failed, "box faults are never remembered")

	require.NoError(t, os.Remove(stateFiller))
	res = b.tick()
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Equal(t, 1, b.Leases())
}

// mountTmpfs mounts a tmpfs of size bytes on dir (its content copied onto the
// mount), unmounted at cleanup, and, unless left is negative, fills it with a file
// that leaves about left bytes free, whose path it returns.
func mountTmpfs(t *testing.T, dir string, size, left int64) string {
	t.Helper()
	saved := t.TempDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	copyDir(t, saved, dir)
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)+",mode=0700"))
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	copyDir(t, dir, saved)
	filler := filepath.Join(dir, "filler")
	if left >= 0 {
		fill(t, filler, dir, left)
	}
	return filler
}

// fill writes path so that about left bytes stay free on dir's file system.
func fill(t *testing.T, path, dir string, left int64) {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	n := max(int64(st.Bavail)*st.Bsize-left, 0)
	require.NoError(t, os.WriteFile(path, make([]byte, n), 0o600))
}

// copyDir copies the content of src into dst (cp -a).
func copyDir(t *testing.T, dst, src string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o700))
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
	require.NoError(t, err, strings.TrimSpace(string(out)))
}
