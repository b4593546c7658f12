package faketenancy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// bundleSHA computes tenancy's bundle_sha (SPEC §7) of a tar or tar.gz: the sha256 of
// the sha256sum listing of every regular file, sorted by path bytewise. The fake keeps
// its own implementation, independent of deployd/bundle, as a witness of the formula.
func bundleSHA(data []byte) (string, error) {
	var r io.Reader = bytes.NewReader(data)
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return "", fmt.Errorf("bundle: gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	tr := tar.NewReader(r)
	sums := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("bundle: tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(path.Clean(strings.TrimPrefix(h.Name, "./")), "./")
		if _, dup := sums[name]; dup {
			return "", fmt.Errorf("bundle: duplicate entry %q", name)
		}
		hs := sha256.New()
		if _, err := io.Copy(hs, tr); err != nil {
			return "", fmt.Errorf("bundle: reading %q: %w", name, err)
		}
		sums[name] = hex.EncodeToString(hs.Sum(nil))
	}
	if len(sums) == 0 {
		return "", errors.New("bundle: no regular file")
	}
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	listing := sha256.New()
	for _, n := range names {
		fmt.Fprintf(listing, "%s  %s\n", sums[n], n)
	}
	return hex.EncodeToString(listing.Sum(nil)), nil
}
