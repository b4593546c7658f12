package deployd_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// TestLoadConfigRefusesWhatIsNotAFile: a config path that is a fifo (a blocking open
// would wait for a writer for ever) or a directory is refused at once, naming the
// path and what it is.
func TestLoadConfigRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, tc := range []struct{ path, kind string }{{fifo, "fifo"}, {dir, "directory"}} {
		done := make(chan error, 1)
		go func() {
			_, err := deployd.LoadConfig(tc.path)
			done <- err
		}()
		select {
		case err := <-done:
			require.Error(t, err)
			assert.ErrorIs(t, err, deployd.ErrConfigInvalid)
			assert.ErrorIs(t, err, fsutil.ErrNotRegular)
			assert.Equal(t, codes.ConfigInvalid, deployd.CodeOf(err))
			assert.Equal(t, tc.path+": cannot read: a "+tc.kind+", not a regular file", err.Error())
		case <-time.After(5 * time.Second):
			t.Fatalf("LoadConfig(%s) hangs on a %s", tc.path, tc.kind)
		}
	}
}
