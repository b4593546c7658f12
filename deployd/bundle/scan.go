package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
)

// copyBufSize is the size of the copy buffer: large enough that the tar reader and
// sha256 are the floor (see BenchmarkVerify).
const copyBufSize = 256 << 10

// readAheadSize is the buffer over the caller's reader; reads of file content larger
// than it bypass it.
const readAheadSize = 32 << 10

// smallBufSize is the first size of the copy buffer; it grows to copyBufSize at the
// first file larger than it, so that verifying a small bundle stays cheap.
const smallBufSize = 32 << 10

// fileSum is one regular file of the bundle: its path as it appears in the sha
// listing and the sha256 of its content.
type fileSum struct {
	path string
	sum  [sha256.Size]byte
	size int64
}

// scanOpts tells scan what to do with the entries beyond hashing them.
type scanOpts struct {
	// strict stops the scan at the first refusal (Extract).
	strict bool
	// file, if set, is called for every regular file whose path is safe, with r
	// positioned at its content. It must read r to the end and write every byte to h.
	file func(name string, size int64, r io.Reader, h hash.Hash, buf []byte) error
	// dir, if set, is called for every directory entry whose path is safe.
	dir func(name string) error
}

// scanResult is what one pass over the stream found.
type scanResult struct {
	files   []fileSum
	dirs    []string
	entries int
	total   int64 // sum of regular file sizes
	rs      refusals
	// complete is true when the stream was read to its end without a fatal error.
	complete bool
	// ambiguous is true when a regular file appears twice, so that no sha exists.
	ambiguous bool
}

// errStreamCap is returned by countReader when the decompressed stream passes its cap.
var errStreamCap = errors.New("stream passes its size cap")

// sourceReader wraps the caller's reader and remembers its own errors (a broken
// connection), which are the caller's problem and not a malformed bundle.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

// countReader counts the decompressed bytes the tar reader consumes, stops at cap
// and honours ctx on every read.
type countReader struct {
	ctx context.Context
	r   io.Reader
	n   int64
	cap int64
}

func (c *countReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if c.n > c.cap {
		return 0, errStreamCap
	}
	if rem := c.cap - c.n + 1; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.cap {
		return n, errStreamCap
	}
	return n, err
}

// errStopped ends a strict scan at its first refusal.
var errStopped = errors.New("stopped at the first refusal")

// callerError marks an error of scanOpts' callbacks (a failed write while
// extracting): it is returned as it is, never turned into a refusal.
type callerError struct{ err error }

func (c *callerError) Error() string { return c.err.Error() }
func (c *callerError) Unwrap() error { return c.err }

// fatalError ends a scan with a refusal (it is not returned to callers).
type fatalError struct{ r Refusal }

func (f *fatalError) Error() string { return f.r.String() }

type scanner struct {
	ctx     context.Context
	lim     Limits
	opts    scanOpts
	src     *sourceReader
	cr      *countReader
	tr      *tar.Reader
	res     *scanResult
	seen    map[string]bool // normalised entry name -> is a directory
	parents map[string]bool // every directory implied by an entry's path
	buf     []byte
	h       hash.Hash
}

// scan reads a bundle stream once. Refusals go into the result; the error is
// non-nil only for problems that are not the bundle's: ctx, the caller's reader,
// or opts' callbacks.
func scan(ctx context.Context, r io.Reader, lim Limits, opts scanOpts) (*scanResult, error) {
	s := &scanner{
		ctx:     ctx,
		lim:     lim.withDefaults(),
		opts:    opts,
		src:     &sourceReader{r: r},
		res:     &scanResult{},
		seen:    map[string]bool{},
		parents: map[string]bool{},
		buf:     make([]byte, smallBufSize),
		h:       sha256.New(),
	}
	err := s.run()
	var fe *fatalError
	switch {
	case err == nil:
		s.res.complete = true
	case errors.Is(err, errStopped):
	case errors.As(err, &fe):
		s.res.rs.add(fe.r.Code, "%s", fe.r.Detail)
	default:
		return nil, err
	}
	return s.res, nil
}

func fatal(c codes.Code, format string, args ...any) error {
	return &fatalError{Refusal{Code: c, Detail: fmt.Sprintf(format, args...)}}
}

// classify turns an error met while reading the stream into a fatal refusal or,
// when it is not the bundle's fault, returns it as it is.
func (s *scanner) classify(err error, where string) error {
	var fe *fatalError
	var ce flate.CorruptInputError
	var cerr *callerError
	switch {
	case errors.As(err, &fe):
		return err
	case errors.As(err, &cerr):
		return cerr.err
	case s.ctx.Err() != nil:
		return s.ctx.Err()
	case s.src.err != nil:
		return fmt.Errorf("bundle: reading the stream: %w", s.src.err)
	case errors.Is(err, errStreamCap):
		return fatal(codes.BundleMalformed, "%s: the stream passes %d bytes of tar data for the configured limits (MaxTotalSize %d, MaxEntries %d, MaxHeaderSize %d)",
			where, s.cr.cap, s.lim.MaxTotalSize, s.lim.MaxEntries, s.lim.MaxHeaderSize)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fatal(codes.BundleMalformed, "%s: the stream is truncated", where)
	case errors.Is(err, gzip.ErrChecksum):
		return fatal(codes.BundleMalformed, "%s: gzip checksum mismatch (corrupt or truncated)", where)
	case errors.Is(err, gzip.ErrHeader), errors.As(err, &ce):
		return fatal(codes.BundleMalformed, "%s: corrupt gzip data", where)
	case errors.Is(err, tar.ErrHeader):
		if s.res.entries == 0 {
			return fatal(codes.BundleMalformed, "not a tar archive (invalid tar header at the start)")
		}
		return fatal(codes.BundleMalformed, "%s: invalid tar header", where)
	case errors.Is(err, tar.ErrFieldTooLong), errors.Is(err, tar.ErrWriteTooLong):
		return fatal(codes.BundleMalformed, "%s: invalid tar header", where)
	}
	return fatal(codes.BundleMalformed, "%s: unreadable tar stream", where)
}

func (s *scanner) open() (io.Reader, error) {
	br := bufio.NewReaderSize(s.src, readAheadSize)
	magic, _ := br.Peek(6)
	if len(magic) == 0 {
		if s.src.err != nil {
			return nil, fmt.Errorf("bundle: reading the stream: %w", s.src.err)
		}
		if err := s.ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fatal(codes.BundleMalformed, "the stream is empty")
	}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, s.classifyGzipOpen(err)
		}
		return gz, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return nil, fatal(codes.BundleMalformed, "zstd compression is not supported: send a plain or gzip-compressed tar")
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return nil, fatal(codes.BundleMalformed, "xz compression is not supported: send a plain or gzip-compressed tar")
	case bytes.HasPrefix(magic, []byte("BZh")):
		return nil, fatal(codes.BundleMalformed, "bzip2 compression is not supported: send a plain or gzip-compressed tar")
	}
	return br, nil
}

func (s *scanner) classifyGzipOpen(err error) error {
	if s.src.err != nil {
		return fmt.Errorf("bundle: reading the stream: %w", s.src.err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fatal(codes.BundleMalformed, "gzip header: the stream is truncated")
	}
	return fatal(codes.BundleMalformed, "gzip header is invalid")
}

func (s *scanner) run() error {
	dec, err := s.open()
	if err != nil {
		return err
	}
	s.cr = &countReader{ctx: s.ctx, r: dec, cap: s.lim.streamCap()}
	s.tr = tar.NewReader(s.cr)
	var endOfLast int64 // stream offset just after the last entry's content
	var last *string    // name of the last entry, quoted only when an error needs it
	after := func() string {
		if last == nil {
			return "at the start of the archive"
		}
		return "after entry " + quote(*last)
	}
	for {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		hdr, err := s.tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			if last == nil && errors.Is(err, io.ErrUnexpectedEOF) && s.ctx.Err() == nil && s.src.err == nil {
				return fatal(codes.BundleMalformed, "not a tar archive (shorter than one 512-byte block)")
			}
			return s.classify(err, after())
		}
		if hdr == nil {
			// With GODEBUG=tarinsecurepath=0 the tar reader stops for good after a
			// non-local name, which was refused already.
			return fatal(codes.BundleMalformed, "%s: the tar reader stopped at a non-local path", after())
		}
		s.res.entries++
		if s.res.entries > s.lim.MaxEntries {
			return fatal(codes.BundleMalformed, "more than %d entries (MaxEntries)", s.lim.MaxEntries)
		}
		if hb := s.cr.n - endOfLast; hb > s.lim.MaxHeaderSize+511 {
			return fatal(codes.BundleMalformed, "entry %q: its tar headers take %d bytes, over the limit of %d (MaxHeaderSize)",
				hdr.Name, hb, s.lim.MaxHeaderSize)
		}
		if err := s.entry(hdr, err != nil); err != nil {
			return s.classify(err, "entry "+quote(hdr.Name))
		}
		// Consume what the entry still holds, so that the offset below is exact.
		if _, err := io.CopyBuffer(io.Discard, s.tr, s.buf); err != nil {
			return s.classify(err, "entry "+quote(hdr.Name))
		}
		endOfLast = s.cr.n
		last = &hdr.Name
		if s.opts.strict && len(s.res.rs.list) > 0 {
			return errStopped
		}
	}
	// A complete tar ends with two zero blocks after the padding of the last entry
	// (less than one block). Without them the stream was cut at an entry boundary.
	if s.cr.n-endOfLast < 1024 {
		return fatal(codes.BundleMalformed, "%s: the stream is truncated (no end-of-archive marker)", after())
	}
	return s.drainTrailer()
}

// drainTrailer reads what follows the end-of-archive marker: zero padding only, at
// most maxTrailer bytes. For gzip this also reads to the end of the compressed stream,
// which checks its CRC and length.
func (s *scanner) drainTrailer() error {
	var n int64
	for {
		k, err := s.cr.Read(s.buf)
		for _, b := range s.buf[:k] {
			if b != 0 {
				return fatal(codes.BundleMalformed, "data after the end of the archive")
			}
		}
		n += int64(k)
		if n > maxTrailer {
			return fatal(codes.BundleMalformed, "more than %d bytes of padding after the end of the archive", maxTrailer)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return s.classify(err, "after the end of the archive")
		}
	}
}

// conflict returns why a new entry cannot coexist with earlier ones ("a" as a file
// and "a/b"), or "". It records the entry's parents.
func (s *scanner) conflict(name string, isDir bool) string {
	if !isDir && s.parents[name] {
		return fmt.Sprintf("entry %q is a file, but earlier entries are inside it", name)
	}
	for i := len(name) - 1; i > 0; i-- {
		if name[i] != '/' {
			continue
		}
		p := name[:i]
		if d, ok := s.seen[p]; ok && !d {
			return fmt.Sprintf("entry %q is inside %q, which is a file", name, p)
		}
		if s.parents[p] {
			break
		}
		s.parents[p] = true
	}
	return ""
}

func quote(name string) string { return fmt.Sprintf("%q", name) }

// normalise strips one leading "./" (what `tar -C dir .` writes) and, for a
// directory, one trailing "/". It reports whether the entry is the archive root
// ("." or "./"), which carries nothing and is skipped.
func normalise(name string, dir bool) (string, bool) {
	n := strings.TrimPrefix(name, "./")
	if dir {
		n = strings.TrimSuffix(n, "/")
	}
	return n, dir && (n == "" || n == ".")
}

// entry handles one tar entry. It returns nil after recording a refusal, or a
// fatal/plain error.
func (s *scanner) entry(hdr *tar.Header, insecure bool) error {
	if !s.allowedType(hdr) {
		return nil
	}
	isDir := hdr.Typeflag == tar.TypeDir
	name, root := normalise(hdr.Name, isDir)
	if root {
		return nil
	}
	why, skip := s.checkEntryPath(hdr.Name, name, isDir, insecure)
	if skip {
		return nil
	}
	s.seen[name] = isDir
	if isDir {
		if why == "" && s.opts.dir != nil {
			return s.opts.dir(name)
		}
		s.res.dirs = append(s.res.dirs, name)
		return nil
	}
	return s.regular(name, hdr.Size, why == "")
}

// allowedType refuses an entry that is neither a regular file nor a directory, and
// a PAX global header that carries more than a comment.
func (s *scanner) allowedType(hdr *tar.Header) bool {
	rs := &s.res.rs
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		// git archive writes one with a "comment" record. Anything else in it could
		// change how other tools read the archive, so it is refused.
		for k := range hdr.PAXRecords {
			if k != "comment" {
				rs.add(codes.ManifestPaths, "PAX global header carries %q; only comment is allowed", k)
				break
			}
		}
		return false
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeDir:
		return true
	default:
		rs.add(codes.ManifestPaths, "entry %q is a %s; only regular files and directories are allowed",
			hdr.Name, typeName(hdr.Typeflag))
		return false
	}
}

// checkEntryPath refuses an unsafe or reserved path, a duplicate and a file/directory
// conflict. why is the path's problem ("" for a safe one); skip is true when a strict
// scan stops looking at the entry.
func (s *scanner) checkEntryPath(raw, name string, isDir, insecure bool) (why string, skip bool) {
	rs := &s.res.rs
	why = checkPath(name)
	if why == "" && insecure {
		why = "path is not local"
	}
	if why == "" {
		why = reservedPath(name)
	}
	if why != "" {
		rs.add(codes.ManifestPaths, "entry %q: %s", raw, why)
		if s.opts.strict {
			return why, true
		}
	}
	if prevDir, dup := s.seen[name]; dup {
		rs.add(codes.BundleMalformed, "entry %q appears twice", name)
		if !prevDir && !isDir {
			s.res.ambiguous = true
		}
		if s.opts.strict {
			return why, true
		}
	}
	if why == "" {
		if c := s.conflict(name, isDir); c != "" {
			rs.add(codes.ManifestPaths, "%s", c)
			if s.opts.strict {
				return why, true
			}
		}
	}
	return why, false
}

// regular hashes a regular file's content (passing it to opts.file when its path is
// safe), within the size limits.
func (s *scanner) regular(name string, size int64, safe bool) error {
	if size > s.lim.MaxFileSize {
		return fatal(codes.BundleMalformed, "entry %q is %d bytes, over the limit of %d (MaxFileSize)", name, size, s.lim.MaxFileSize)
	}
	s.res.total += size
	if s.res.total > s.lim.MaxTotalSize {
		return fatal(codes.BundleMalformed, "entry %q brings the unpacked size to %d bytes, over the limit of %d (MaxTotalSize)",
			name, s.res.total, s.lim.MaxTotalSize)
	}
	if size > int64(len(s.buf)) && len(s.buf) < copyBufSize {
		s.buf = make([]byte, copyBufSize)
	}
	s.h.Reset()
	if safe && s.opts.file != nil {
		if err := s.opts.file(name, size, s.tr, s.h, s.buf); err != nil {
			return err
		}
	} else if _, err := io.CopyBuffer(s.h, s.tr, s.buf); err != nil {
		return err
	}
	fs := fileSum{path: name, size: size}
	s.h.Sum(fs.sum[:0])
	s.res.files = append(s.res.files, fs)
	return nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hardlink"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "fifo"
	case tar.TypeCont:
		return "contiguous file"
	}
	return fmt.Sprintf("entry of tar type %q", string(rune(t)))
}
