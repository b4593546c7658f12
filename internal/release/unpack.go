package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// Unpack extracts the verified bundle r into releases/.<sha>.plan, a hidden
// directory that is never a release (no .env, never promoted; Repair removes a
// leftover one), for a reader that needs the bundle's files without staging it
// (`monky-deployd plan`). The caller calls remove when done.
func (s *Store) Unpack(ctx context.Context, r io.Reader, sha string) (dir string, remove func(), err error) {
	if !ids.ValidSHA(sha) {
		return "", nil, fmt.Errorf("release: %q is not a bundle sha", sha)
	}
	dir = filepath.Join(s.Releases(), "."+sha+".plan")
	_ = os.RemoveAll(dir)
	if err := fsutil.MkdirMode(dir, 0o700); err != nil {
		return "", nil, err
	}
	remove = func() {
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("could not remove the bundle unpacked for the plan; the next tick removes it", "path", dir, "err", err)
		}
	}
	if err := bundle.Extract(ctx, r, dir, sha, bundle.Limits{}); err != nil {
		remove()
		return "", nil, err
	}
	return dir, remove, nil
}
