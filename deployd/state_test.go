package deployd_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestUnreadableStateIsTemporary: a state.json that exists but cannot be read (EIO,
// EACCES, a mount gone) is a temporary condition: exit 75, STATE_UNAVAILABLE, nothing
// moved aside, so that the failed-sha memory and the env-mismatch latch survive. Root
// ignores file modes, so the read error is made with a symlink into a directory that
// is, for a while, a file (ENOTDIR), as a volume that is not mounted.
func TestUnreadableStateIsTemporary(t *testing.T) {
	b := newBox(t, boxOptions{})
	bn := faketenancy.SampleApp(b.Env, 1)
	bn.Files["compose.yaml"] = "services:\n  web:\n    image: nginx\n    privileged: true\n"
	sha := b.Publish(bn)
	_, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
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
			reports, leases := len(b.Stack.Reports(b.Env)), b.TenancyCalls("/v1/agent")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := run.run(ctx)
			require.Error(t, err)
			assert.Equal(t, deployd.ExitTemporary, deployd.ExitCode(err), "err: %v", err)
			assert.Equal(t, codes.StateUnavailable, deployd.CodeOf(err))
			assert.True(t, deployd.IsTemporary(err))
			matches, _ := filepath.Glob(b.Cfg.StatePath() + ".corrupt-*")
			assert.Empty(t, matches, "an unreadable state is not moved aside")
			fi, lerr := os.Lstat(b.Cfg.StatePath())
			require.NoError(t, lerr)
			assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "state.json is left as it is")
			assert.Len(t, b.Stack.Reports(b.Env), reports, "no report")
			assert.Equal(t, leases, b.TenancyCalls("/v1/agent"), "no network")
		})
	}

	// The volume is back: the memory of the failed sha is still there.
	require.NoError(t, os.Remove(vol))
	require.NoError(t, os.Rename(vol+".away", vol))
	assert.Contains(t, b.State().Failed, sha)
	out, code := b.tick()
	assert.Equal(t, deployd.ExitFailed, code)
	assert.Equal(t, codes.Privileged, out.Code)
	assert.Equal(t, 1, b.TenancyCalls("/v1/agent/bundles/"+sha), "the failed sha costs no second download")
}
