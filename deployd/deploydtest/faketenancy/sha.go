package faketenancy

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// SHA returns the bundle sha of a tar or gzip-compressed tar read from r, with the
// fake's own code rather than deployd/bundle's, so that a bug in the agent's hashing
// cannot hide behind the same bug in the fake. The formula is tenancy's
// (docs/BUNDLE.md, "The bundle sha"): list every regular file, manifest.json included,
// sorted by path bytewise, one "<hex sha256 of content>  <path>\n" line each; the sha
// is the hex sha256 of that listing. A leading "./" on an entry name is not part of
// the path; other entries (directories, symlinks, devices) are not listed.
//
// SHA refuses only what leaves no sha: a stream that is not a complete tar (cut short,
// or without its end-of-archive marker), a corrupt gzip stream, or a regular file that
// appears twice. Unsafe paths and non-regular entries pass, so that hostile bundles can
// be published for the agent to refuse.
func SHA(r io.Reader) (string, error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	var gz *gzip.Reader
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		var err error
		if gz, err = gzip.NewReader(br); err != nil {
			return "", fmt.Errorf("faketenancy: bundle sha: gzip header: %w", err)
		}
		src = gz
	}
	cr := &countingReader{r: src}
	tr := tar.NewReader(cr)
	files := map[string][sha256.Size]byte{}
	var endOfLast int64 // offset just after the last entry's content
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("faketenancy: bundle sha: not a complete tar: %w", err)
		}
		if hdr.Typeflag == tar.TypeReg {
			path := strings.TrimPrefix(hdr.Name, "./")
			if _, dup := files[path]; dup {
				return "", fmt.Errorf("faketenancy: bundle sha: %q appears twice", path)
			}
			h := sha256.New()
			if _, err := io.Copy(h, tr); err != nil {
				return "", fmt.Errorf("faketenancy: bundle sha: reading %q: %w", path, err)
			}
			files[path] = [sha256.Size]byte(h.Sum(nil))
		} else if _, err := io.Copy(io.Discard, tr); err != nil {
			return "", fmt.Errorf("faketenancy: bundle sha: reading %q: %w", hdr.Name, err)
		}
		endOfLast = cr.n
	}
	// The tar reader also ends cleanly where the stream was cut at an entry boundary;
	// a complete tar has two zero blocks after the last entry's padding.
	if cr.n-endOfLast < 1024 {
		return "", errors.New("faketenancy: bundle sha: not a complete tar: no end-of-archive marker")
	}
	if gz != nil {
		if _, err := io.Copy(io.Discard, gz); err != nil {
			return "", fmt.Errorf("faketenancy: bundle sha: gzip stream: %w", err)
		}
	}
	return listingSHA(files), nil
}

// listingSHA is the bundle sha of files, path → sha256 of content.
func listingSHA(files map[string][sha256.Size]byte) string {
	paths := slices.Sorted(maps.Keys(files))
	listing := sha256.New()
	for _, p := range paths {
		sum := files[p]
		fmt.Fprintf(listing, "%s  %s\n", hex.EncodeToString(sum[:]), p)
	}
	return hex.EncodeToString(listing.Sum(nil))
}

// sums hashes the content of every file.
func sums(files map[string][]byte) map[string][sha256.Size]byte {
	out := make(map[string][sha256.Size]byte, len(files))
	for p, c := range files {
		out[p] = sha256.Sum256(c)
	}
	return out
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
