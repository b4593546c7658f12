package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/release"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// secretFiles lists the files under dir (relative to it; symlinks not followed) that
// hold the secret value the box's OpenBao serves.
func secretFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(testbox.DefaultSecret)) {
			rel, _ := filepath.Rel(dir, p)
			found = append(found, rel)
		}
		return nil
	}))
	return found
}

// twoReleases applies two releases of the sample app (its DB_PASSWORD is the box's
// secret) and leaves the leftover of a stage that a crash interrupted, its .env
// written; it returns the two shas, the older first.
func twoReleases(t *testing.T, b *box) (string, string) {
	t.Helper()
	first := b.Publish(faketenancy.SampleApp(b.Env, 1))
	b.tickExit(0)
	second := b.Publish(faketenancy.SampleApp(b.Env, 2))
	b.tickExit(0)
	require.Equal(t, second, b.Live())
	require.ElementsMatch(t, []string{first, second}, b.Releases())
	leftover := filepath.Join(b.Cfg.ReleasesDir(), ".0000000000000000000000000000000000000000000000000000000000000000.tmp")
	require.NoError(t, os.MkdirAll(leftover, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(leftover, ".env"), []byte("DB_PASSWORD="+testbox.DefaultSecret+"\n"), 0o600))
	require.ElementsMatch(t, []string{
		filepath.Join("releases", first, ".env"), filepath.Join("releases", second, ".env"), filepath.Join(leftover[len(b.Cfg.DeployDir)+1:], ".env"),
	}, secretFiles(t, b.Cfg.DeployDir), "before the down, the releases' .env hold the secret")
	return first, second
}

// TestBinaryPurgeLeavesNoSecret: through the binary and the fakes, a down with purge
// on a dev env removes every release with its .env and every leftover: no file under
// deploy_dir holds the secret, the state names nothing live or previous, the report and
// the log line say what was removed, and the next apply stages the release afresh
// (a new lease, the secret read again).
func TestBinaryPurgeLeavesNoSecret(t *testing.T) {
	testprog.SkipIfShort(t)
	b := newBox(t, boxOpts{script: fastScript(nil)})
	first, second := twoReleases(t, b)
	downs := len(b.DockerCalls("down"))

	b.SetDesired(faketenancy.Desired{Action: "down", Purge: true})
	res := b.tickExit(0)
	assert.Empty(t, secretFiles(t, b.Cfg.DeployDir), "no secret value under deploy_dir after a purge")
	assert.Empty(t, b.Releases(), "every release is removed, releases/ stays")
	assert.Empty(t, b.Live())
	calls := b.DockerCalls("down")[downs:]
	require.Len(t, calls, 1)
	assert.Contains(t, calls[0].Argv, "-v")
	st := b.State()
	assert.Empty(t, st.LiveSHA)
	assert.Empty(t, st.PreviousSHA, "nothing is left to restore")
	rep := b.LastReport()
	assert.Equal(t, "down", rep.Result)
	assert.Equal(t, second, rep.SHA, "the report names the release taken down")
	for _, sha := range []string{first, second} {
		assert.Contains(t, rep.Detail, "releases/"+release.Short(sha))
		assert.Contains(t, res.Stderr, filepath.Join(b.Cfg.ReleasesDir(), sha), "the log line names the releases removed")
	}
	assert.Contains(t, rep.Detail, "removed 2 releases")
	assert.Contains(t, rep.Detail, "2 .env files")
	assert.Contains(t, rep.Detail, "compose down -v removed the volumes")
	assert.Contains(t, res.Stderr, "purged: removed every release with its .env")
	assert.Contains(t, res.Stderr, "env_files=2")
	// The interrupted stage was swept, its .env first, before the tick began.
	assert.Contains(t, res.Stderr, `msg="removed a leftover of an interrupted apply"`)
	assert.NotContains(t, res.Stderr, testbox.DefaultSecret)
	assert.NotContains(t, rep.Detail, testbox.DefaultSecret)

	// Tenancy still asks for the purge: the next tick finds nothing to take down or
	// remove.
	b.tickExit(0)
	assert.Len(t, b.DockerCalls("down"), downs+1, "nothing to take down again")
	assert.Equal(t, "purge: nothing was left to remove under deploy_dir", b.LastReport().Detail)

	// The next apply stages the release afresh: a new lease, the secret read again.
	leases := b.Leases()
	b.SetDesired(faketenancy.Desired{Action: "apply", SHA: second})
	b.tickExit(0)
	assert.Equal(t, second, b.Live())
	assert.Equal(t, leases+1, b.Leases())
	assert.Equal(t, []string{filepath.Join("releases", second, ".env")}, secretFiles(t, b.Cfg.DeployDir))
	assert.Equal(t, "applied", b.LastReport().Result)
}

// TestBinaryDownKeepsTheReleases: a plain down, and a purge on prod (refused: prod
// never purges), keep every release with its .env (docs/OPERATIONS.md, "Down and
// purge"); the leftover of an interrupted stage is swept all the same. A purge on dev
// after a plain down removes the volumes with the release taken down, then every
// release.
func TestBinaryDownKeepsTheReleases(t *testing.T) {
	testprog.SkipIfShort(t)
	tests := []struct {
		name  string
		env   string
		purge bool
	}{
		{name: "plain down on dev", env: "env-dev-01"},
		{name: "purge on prod", env: "env-prod-01", purge: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBox(t, boxOpts{env: tt.env, script: fastScript(nil)})
			first, second := twoReleases(t, b)
			downs := len(b.DockerCalls("down"))

			b.SetDesired(faketenancy.Desired{Action: "down", Purge: tt.purge})
			res := b.tickExit(0)
			assert.Empty(t, b.Live())
			assert.ElementsMatch(t, []string{first, second}, b.Releases())
			assert.ElementsMatch(t, []string{filepath.Join("releases", first, ".env"), filepath.Join("releases", second, ".env")},
				secretFiles(t, b.Cfg.DeployDir), "the releases keep their .env; the interrupted stage's is swept")
			calls := b.DockerCalls("down")[downs:]
			require.Len(t, calls, 1)
			assert.NotContains(t, calls[0].Argv, "-v")
			assert.Equal(t, second, b.State().PreviousSHA, "the release taken down is kept")
			rep := b.LastReport()
			assert.Equal(t, "down", rep.Result)
			assert.NotContains(t, rep.Detail, "purge")
			if tt.purge {
				assert.Contains(t, res.Stderr, "prod never purges")
				return
			}

			// A purge after the plain down: compose down -v with the release taken
			// down, then nothing is left.
			b.SetDesired(faketenancy.Desired{Action: "down", Purge: true})
			b.tickExit(0)
			calls = b.DockerCalls("down")[downs:]
			require.Len(t, calls, 2)
			assert.Contains(t, calls[1].Argv, "-v")
			assert.Equal(t, second, filepath.Base(projectDirOf(calls[1].Argv)))
			assert.Empty(t, secretFiles(t, b.Cfg.DeployDir))
			assert.Empty(t, b.Releases())
			assert.Empty(t, b.State().PreviousSHA)
			assert.Contains(t, b.LastReport().Detail, "removed 2 releases")
		})
	}
}
