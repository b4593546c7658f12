package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
)

// SHA returns the bundle sha of the tar or gzip stream r (docs/BUNDLE.md): the hex sha256
// of the listing "<hex sha256 of content>  <path>\n" of every regular file,
// manifest.json included, sorted by path bytewise. Tar metadata, entry order and
// compression do not change it; a leading "./" on entry names is not part of the
// path. It reads r once and keeps no file in memory.
//
// SHA checks only what it needs to compute the sha: the stream must be a complete
// tar within lim, with no regular file twice; otherwise it returns a *RefusedError
// (BUNDLE_MALFORMED). Unsafe paths and non-regular entries do not stop it, so that a
// test server can publish a hostile bundle under its sha; Verify refuses those.
func SHA(ctx context.Context, r io.Reader, lim Limits) (string, error) {
	res, err := scan(ctx, r, lim, scanOpts{})
	if err != nil {
		return "", err
	}
	if !res.complete || res.ambiguous {
		var rs refusals
		for _, r := range res.rs.list {
			if r.Code == codes.BundleMalformed {
				rs.list = append(rs.list, r)
			}
		}
		return "", &RefusedError{Refusals: rs.result()}
	}
	return listingSHA(res.files), nil
}

// listingSHA computes the sha of the sorted listing.
func listingSHA(files []fileSum) string {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b fileSum) int { return strings.Compare(a.path, b.path) })
	h := sha256.New()
	line := make([]byte, 0, 2*sha256.Size+2+256+1)
	for _, f := range files {
		line = hex.AppendEncode(line[:0], f.sum[:])
		line = append(line, ' ', ' ')
		line = append(line, f.path...)
		line = append(line, '\n')
		h.Write(line)
	}
	return hex.EncodeToString(h.Sum(nil))
}
