package deployd_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// tickWithin runs one tick of b's agent and fails the test if it takes more than
// five seconds: no read of a file on the box may wait.
func (b *box) tickWithin(t *testing.T) (deployd.Outcome, error) {
	t.Helper()
	type res struct {
		out deployd.Outcome
		err error
	}
	done := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := b.agent.Tick(ctx)
		done <- res{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("the tick waits on a file")
		return deployd.Outcome{}, nil
	}
}

// TestCorruptTokenFile: a corrupt bao.token is treated like an invalid token: the
// tick bootstraps from the grant when one is there; without one it is UNAUTHENTICATED
// (exit 1, not an endless 75), it says what to do, and the file is never sent.
func TestCorruptTokenFile(t *testing.T) {
	t.Run("grant present", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		b.SetDesired(faketenancy.Desired{Action: "none"})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 64), 0o600))
		_, err := b.tickWithin(t)
		require.NoError(t, err)
		assert.Contains(t, b.Logs.String(), "the OpenBao token file is corrupt; bootstrapping from the grant file")
		_, err = os.Stat(b.Cfg.BootstrapGrant)
		assert.ErrorIs(t, err, os.ErrNotExist, "the grant is consumed")
		assert.Equal(t, 1, b.BaoCalls("/login"))
	})
	t.Run("no grant", func(t *testing.T) {
		b := newBox(t, boxOptions{noGrant: true})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, os.WriteFile(b.Cfg.TokenPath(), make([]byte, 64), 0o600))
		_, err := b.tickWithin(t)
		require.Error(t, err)
		assert.ErrorIs(t, err, deployd.ErrTokenCorrupt)
		assert.Equal(t, codes.Unauthenticated, deployd.CodeOf(err))
		assert.Equal(t, deployd.ExitFailed, deployd.ExitCode(err))
		assert.Contains(t, err.Error(), "the OpenBao token file "+b.Cfg.TokenPath()+" is corrupt (not printable ASCII)")
		assert.Contains(t, err.Error(), "place a fresh bootstrap grant at "+b.Cfg.BootstrapGrant+" and run `monky-deployd bootstrap`")
		assert.Empty(t, b.Stack.Bao.Requests(), "the corrupt token is never sent")
		assert.Empty(t, b.Stack.Tenancy.Requests())
	})
}

// TestNonRegularStateAndGrant: a state.json or a grant that is a fifo is refused at
// once, naming the path; the fifo is left where it is.
func TestNonRegularStateAndGrant(t *testing.T) {
	t.Run("state", func(t *testing.T) {
		b := newBox(t, boxOptions{})
		require.NoError(t, os.MkdirAll(b.Cfg.StateDir, 0o700))
		require.NoError(t, syscall.Mkfifo(b.Cfg.StatePath(), 0o600))
		_, err := b.tickWithin(t)
		require.Error(t, err)
		assert.ErrorIs(t, err, fsutil.ErrNotRegular)
		assert.Equal(t, codes.StateUnavailable, deployd.CodeOf(err))
		assert.Equal(t, deployd.ExitFailed, deployd.ExitCode(err), "it does not go away on its own: not a 75")
		assert.Contains(t, err.Error(), b.Cfg.StatePath()+" is a fifo, not a regular file")
		_, err = deployd.ReadState(b.Cfg)
		assert.ErrorIs(t, err, fsutil.ErrNotRegular)
		fi, err := os.Lstat(b.Cfg.StatePath())
		require.NoError(t, err)
		assert.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "left as it is")
		assert.Empty(t, b.Stack.Tenancy.Requests())
	})
	t.Run("grant", func(t *testing.T) {
		b := newBox(t, boxOptions{noGrant: true})
		require.NoError(t, syscall.Mkfifo(b.Cfg.BootstrapGrant, 0o600))
		_, err := b.tickWithin(t)
		require.Error(t, err)
		assert.ErrorIs(t, err, fsutil.ErrNotRegular)
		assert.Equal(t, codes.Unauthenticated, deployd.CodeOf(err))
		assert.Contains(t, err.Error(), b.Cfg.BootstrapGrant+" is a fifo, not a regular file")
		assert.Empty(t, b.Stack.Bao.Requests())
	})
}

// TestUnreadableStateIsTheBoxs: a state.json that exists but cannot be read (EIO,
// EACCES, a mount gone) is the box's STATE_UNAVAILABLE: exit 1 (a person must look;
// one code, one meaning), nothing moved aside, so that the failed-sha memory and the env-mismatch latch survive. Root
// ignores file modes, so the read error is made with a symlink into a directory that
// is, for a while, a file (ENOTDIR), as a volume that is not mounted.
func TestUnreadableStateIsTheBoxs(t *testing.T) {
	b := newBox(t, boxOptions{})
	sha := b.refusePrivileged()
	require.Contains(t, b.State().Failed, sha)

	vol := filepath.Join(b.Dir, "vol")
	require.NoError(t, os.Mkdir(vol, 0o700))
	require.NoError(t, os.Rename(b.Cfg.StatePath(), filepath.Join(vol, "state.json")))
	require.NoError(t, os.Symlink(filepath.Join(vol, "state.json"), b.Cfg.StatePath()))
	require.NoError(t, os.Rename(vol, vol+".away"))
	require.NoError(t, os.WriteFile(vol, nil, 0o600))

	for _, run := range []struct {
		name string
		run  func(context.Context) (deployd.Outcome, error)
	}{
		{"tick", b.agent.Tick},
		{"bootstrap", func(ctx context.Context) (deployd.Outcome, error) { return b.agent.Bootstrap(ctx, "") }},
	} {
		t.Run(run.name, func(t *testing.T) {
			reports, leases := len(b.Stack.Tenancy.Reports(b.Env)), b.TenancyCalls("/v1/agent")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := run.run(ctx)
			require.Error(t, err)
			assert.Equal(t, deployd.ExitFailed, deployd.ExitCode(err), "err: %v", err)
			assert.Equal(t, codes.StateUnavailable, deployd.CodeOf(err))
			assert.False(t, deployd.IsTemporary(err))
			matches, _ := filepath.Glob(b.Cfg.StatePath() + ".corrupt-*")
			assert.Empty(t, matches, "an unreadable state is not moved aside")
			fi, lerr := os.Lstat(b.Cfg.StatePath())
			require.NoError(t, lerr)
			assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "state.json is left as it is")
			assert.Len(t, b.Stack.Tenancy.Reports(b.Env), reports, "no report")
			assert.Equal(t, leases, b.TenancyCalls("/v1/agent"), "no network")
		})
	}

	// The volume is back: the memory of the failed sha is still there.
	require.NoError(t, os.Remove(vol))
	require.NoError(t, os.Rename(vol+".away", vol))
	assert.Contains(t, b.State().Failed, sha)
	b.tickEnds(deployd.ExitFailed, codes.Privileged)
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/bundles/"+sha), "the failed sha costs no second download")
}
