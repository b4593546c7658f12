package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// PackOptions are the choices of Pack and PackDir.
type PackOptions struct {
	// Gzip compresses the tar (gzip with no name and no mtime in its header).
	Gzip bool
	// Limits are those of the box (zero fields: the defaults). Pack refuses a bundle
	// that would pass MaxEntries, MaxFileSize, MaxTotalSize, MaxManifestSize or, for a
	// compose file, MaxComposeFileSize, so that what it writes is never refused for
	// its size by a box with the same limits.
	Limits Limits
}

// PackResult is what Pack wrote.
type PackResult struct {
	// SHA is the bundle sha, computed from the bytes written (docs/BUNDLE.md).
	SHA string
	// Manifest is the manifest packed.
	Manifest Manifest
	// Files is the number of regular files, manifest.json included.
	Files int
	// Size is the unpacked size in bytes: the sum of all regular files, manifest
	// included.
	Size int64
}

// Statement returns what a signature of the packed bundle states (Sign).
func (r *PackResult) Statement() Statement {
	return Statement{SHA: r.SHA, EnvID: r.Manifest.EnvID, Serial: r.Manifest.Serial}
}

// The fixed metadata of every entry Pack writes.
var packModTime = time.Unix(0, 0)

// Pack writes to w the bundle of the regular files under dir and the manifest m.
// m.Files nil or empty means every file under dir; otherwise it must list them
// exactly. manifest.json is m encoded by encoding/json with two-space indentation
// and a final newline; dir itself may not hold a manifest.json at its root (PackDir
// packs that one).
//
// See PackDir for what is written and refused.
func Pack(ctx context.Context, w io.Writer, dir string, m Manifest, opt PackOptions) (*PackResult, error) {
	p, err := newPacker(ctx, dir, opt)
	if err != nil {
		return nil, err
	}
	defer p.close()
	if _, found := p.manifest(); found {
		p.rs.add(codes.ManifestPaths, "%q is in the directory: Pack writes the manifest it is given (use PackDir to pack the directory's own)", ManifestName)
	}
	if len(m.Files) == 0 {
		m.Files = p.names()
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%w: the manifest cannot be encoded: %w", ErrInvalidArgument, err)
	}
	return p.pack(w, append(data, '\n'))
}

// PackDir writes to w the bundle of the directory dir, which holds manifest.json at
// its root and the files it lists: the manifest is packed byte for byte, so that the
// sha of the result is the coreutils line of docs/BUNDLE.md run in dir.
//
// The bundle is reproducible: manifest.json comes first, then every directory and
// regular file sorted bytewise by path (a directory just before its contents); each
// entry has mtime 0, uid and gid 0, no user or group name, mode FileMode (0644) or
// DirMode (0755) whatever the file system says, in the PAX format; with
// PackOptions.Gzip the gzip header has no name and mtime 0. The same files give the
// same bytes, whatever their times, owners, modes or the order the directory lists
// them in. Empty directories are left out (they are not part of the sha).
//
// It streams: files are read one at a time through a fixed buffer and hashed as they
// are written, and nothing but the manifest is held in memory, however large the
// bundle is. The sha is computed from the bytes written (PackResult.SHA).
//
// Before it writes anything, PackDir refuses what a box would refuse on paths, entry
// types, the manifest and the limits, all at once, as a *RefusedError: a symlink, a
// device, a fifo, a socket (MANIFEST_PATHS, naming the path; a symlink is never
// followed), an unsafe path or a root .env (MANIFEST_PATHS), files that are not the
// manifest's (MANIFEST_PATHS), a manifest that Verify would refuse on its own
// (BUNDLE_MALFORMED, MANIFEST_PATHS, SECRET_PATH), a limit passed (BUNDLE_MALFORMED).
// The compose files are not checked: run Verify on the result for that. A file that
// changes size while it is packed, an unreadable file or a failing w is a plain error.
// On any error w may hold a partial bundle.
func PackDir(ctx context.Context, w io.Writer, dir string, opt PackOptions) (*PackResult, error) {
	p, err := newPacker(ctx, dir, opt)
	if err != nil {
		return nil, err
	}
	defer p.close()
	mf, found := p.manifest()
	if !found {
		p.rs.add(codes.BundleMalformed, "the directory has no %s at its root", ManifestName)
		return nil, p.refused()
	}
	if mf.size > p.lim.MaxManifestSize {
		p.rs.add(codes.BundleMalformed, "%s is %d bytes, over the limit of %d (MaxManifestSize)", ManifestName, mf.size, p.lim.MaxManifestSize)
		return nil, p.refused()
	}
	data, err := p.read(mf)
	if err != nil {
		return nil, err
	}
	return p.pack(w, data)
}

// packFile is one regular file found under the directory.
type packFile struct {
	name string // slash-separated, relative to the directory
	size int64
	info fs.FileInfo
}

type packer struct {
	ctx   context.Context
	dir   string
	root  *os.Root
	opt   PackOptions
	lim   Limits
	files []packFile // sorted by name; manifest.json excluded
	mf    *packFile  // the directory's own manifest.json
	rs    refusals
	buf   []byte // the copy buffer, one for every file
}

// newPacker opens dir and lists it; what the listing refuses goes into rs.
func newPacker(ctx context.Context, dir string, opt PackOptions) (*packer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle: pack: %w", err)
	}
	p := &packer{ctx: ctx, dir: dir, root: root, opt: opt, lim: opt.Limits.withDefaults(), buf: make([]byte, smallBufSize)}
	if err := p.list(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *packer) close() { _ = p.root.Close() }

// list walks the directory without following any symlink.
func (p *packer) list() error {
	err := fs.WalkDir(p.root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("bundle: pack: reading %s: %w", p.path(name), err)
		}
		if err := p.ctx.Err(); err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		why := checkPath(name)
		if why == "" {
			why = reservedPath(name)
		}
		if why != "" {
			p.rs.add(codes.ManifestPaths, "%q: %s", name, why)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case !t.IsRegular():
			p.rs.add(codes.ManifestPaths, "%q is a %s; a bundle holds only regular files and directories", name, fsutil.KindOf(t))
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("bundle: pack: %s: %w", p.path(name), err)
		}
		f := packFile{name: name, size: info.Size(), info: info}
		if name == ManifestName {
			p.mf = &f
			return nil
		}
		p.files = append(p.files, f)
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(p.files, func(a, b packFile) int { return strings.Compare(a.name, b.name) })
	return nil
}

func (p *packer) path(name string) string { return path.Join(p.dir, name) }

func (p *packer) manifest() (packFile, bool) {
	if p.mf == nil {
		return packFile{}, false
	}
	return *p.mf, true
}

func (p *packer) names() []string {
	names := make([]string, len(p.files))
	for i, f := range p.files {
		names[i] = f.name
	}
	return names
}

func (p *packer) refused() error { return &RefusedError{Refusals: p.rs.result()} }

// read returns the content of a small file of the directory (the manifest).
func (p *packer) read(f packFile) ([]byte, error) {
	var b bytes.Buffer
	if err := p.copy(&b, f, sha256.New()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// pack checks everything, then writes the tar with manifest (its bytes) first.
func (p *packer) pack(w io.Writer, manifest []byte) (*PackResult, error) {
	m, mrs := decodeManifest(manifest)
	for _, r := range mrs {
		p.rs.add(r.Code, "%s", r.Detail)
	}
	p.checkFiles(m, int64(len(manifest)))
	if len(p.rs.list) > 0 {
		return nil, p.refused()
	}
	out := w
	var zw *gzip.Writer
	if p.opt.Gzip {
		zw = gzip.NewWriter(w) // no name, no comment, mtime 0: nothing of the host
		out = zw
	}
	tw := tar.NewWriter(out)
	res := &PackResult{Manifest: m, Files: 1 + len(p.files), Size: int64(len(manifest))}
	sums := make([]fileSum, 0, 1+len(p.files))
	if err := writeHeader(tw, ManifestName, int64(len(manifest)), false); err != nil {
		return nil, err
	}
	if _, err := tw.Write(manifest); err != nil {
		return nil, fmt.Errorf("bundle: pack: writing %s: %w", ManifestName, err)
	}
	sums = append(sums, fileSum{path: ManifestName, sum: sha256.Sum256(manifest), size: int64(len(manifest))})
	h := sha256.New()
	made := map[string]bool{}
	for _, f := range p.files {
		if err := p.ctx.Err(); err != nil {
			return nil, err
		}
		if err := p.parents(tw, f.name, made); err != nil {
			return nil, err
		}
		if err := writeHeader(tw, f.name, f.size, false); err != nil {
			return nil, err
		}
		h.Reset()
		if err := p.copy(tw, f, h); err != nil {
			return nil, err
		}
		sum := fileSum{path: f.name, size: f.size}
		h.Sum(sum.sum[:0])
		sums = append(sums, sum)
		res.Size += f.size
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("bundle: pack: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("bundle: pack: %w", err)
		}
	}
	res.SHA = listingSHA(sums)
	return res, nil
}

// checkFiles adds the refusals of the directory's files against the manifest and
// the limits.
func (p *packer) checkFiles(m Manifest, manifestSize int64) {
	if manifestSize > p.lim.MaxManifestSize {
		p.rs.add(codes.BundleMalformed, "%s is %d bytes, over the limit of %d (MaxManifestSize)", ManifestName, manifestSize, p.lim.MaxManifestSize)
	}
	onDisk := make(map[string]bool, len(p.files))
	total := manifestSize
	dirs := map[string]bool{}
	compose := map[string]bool{}
	for _, c := range m.ComposeFiles {
		compose[c] = true
	}
	for _, f := range p.files {
		onDisk[f.name] = true
		total += f.size
		for d := path.Dir(f.name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		if f.size > p.lim.MaxFileSize {
			p.rs.add(codes.BundleMalformed, "%q is %d bytes, over the limit of %d (MaxFileSize)", f.name, f.size, p.lim.MaxFileSize)
		} else if compose[f.name] && f.size > p.lim.MaxComposeFileSize {
			p.rs.add(codes.BundleMalformed, "compose file %q is %d bytes, over the limit of %d (MaxComposeFileSize)", f.name, f.size, p.lim.MaxComposeFileSize)
		}
	}
	if total > p.lim.MaxTotalSize {
		p.rs.add(codes.BundleMalformed, "the files come to %d bytes, over the limit of %d (MaxTotalSize)", total, p.lim.MaxTotalSize)
	}
	if n := 1 + len(p.files) + len(dirs); n > p.lim.MaxEntries {
		p.rs.add(codes.BundleMalformed, "the bundle would have %d entries, over the limit of %d (MaxEntries)", n, p.lim.MaxEntries)
	}
	listed := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		listed[f] = true
		if !onDisk[f] && checkPath(f) == "" && f != ManifestName {
			p.rs.add(codes.ManifestPaths, "%q is listed in files but not in the directory", f)
		}
	}
	for _, f := range p.files {
		if !listed[f.name] {
			p.rs.add(codes.ManifestPaths, "%q is in the directory but not in files", f.name)
		}
	}
}

// parents writes the directory entries of name's parents not written yet.
func (p *packer) parents(tw *tar.Writer, name string, made map[string]bool) error {
	d := path.Dir(name)
	if d == "." || made[d] {
		return nil
	}
	if err := p.parents(tw, d, made); err != nil {
		return err
	}
	made[d] = true
	return writeHeader(tw, d+"/", 0, true)
}

func writeHeader(tw *tar.Writer, name string, size int64, dir bool) error {
	h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: int64(FileMode),
		ModTime: packModTime, Format: tar.FormatPAX}
	if dir {
		h.Typeflag, h.Mode = tar.TypeDir, int64(DirMode)
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("bundle: pack: writing the header of %q: %w", name, err)
	}
	return nil
}

// copy streams the file f to w and into h, and checks that it is still the regular
// file that was listed and still has the size listed (the tar header says it).
func (p *packer) copy(w io.Writer, f packFile, h hash.Hash) error {
	file, err := p.root.Open(f.name)
	if err != nil {
		return fmt.Errorf("bundle: pack: %w", err)
	}
	defer func() { _ = file.Close() }() // read-only
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("bundle: pack: %s: %w", p.path(f.name), err)
	}
	if !st.Mode().IsRegular() || !os.SameFile(st, f.info) {
		return fmt.Errorf("bundle: pack: %s was replaced while packing", p.path(f.name))
	}
	if f.size > int64(len(p.buf)) && len(p.buf) < copyBufSize {
		p.buf = make([]byte, copyBufSize)
	}
	n, err := io.CopyBuffer(io.MultiWriter(w, h), io.LimitReader(ctxReader{p.ctx, file}, f.size), p.buf)
	if err != nil {
		return fmt.Errorf("bundle: pack: %s: %w", p.path(f.name), err)
	}
	if n != f.size {
		return fmt.Errorf("bundle: pack: %s shrank while packing (%d bytes, listed with %d)", p.path(f.name), n, f.size)
	}
	var one [1]byte
	if k, _ := file.Read(one[:]); k > 0 {
		return fmt.Errorf("bundle: pack: %s grew while packing (listed with %d bytes)", p.path(f.name), f.size)
	}
	return nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
