package bundle

import (
	"bytes"
	"context"
	"fmt"
	"hash"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/composecheck"
)

// Expect is what the caller knows about the bundle it is about to verify.
type Expect struct {
	// EnvID is the box's env_id. Required: an empty EnvID is an error of the caller
	// (ErrInvalidArgument), not a refusal.
	EnvID string
	// SHA is the bundle sha tenancy asked for; "" skips the SHA_MISMATCH check.
	SHA string
	// LiveSerial is the serial of the live release; 0 means nothing is live.
	LiveSerial int64
	// Rollback is true when the check-in made a rollback explicit.
	Rollback bool
	// Disk is the free space under deploy_dir; nil skips the DISK_LOW check.
	Disk *Disk
	// AllowPrivileged names the services the box allows to be privileged.
	AllowPrivileged []string
	// ProjectName is the compose project name the agent runs the release under;
	// "" means "monky", the config's default.
	ProjectName string
	// Limits bounds the read; zero fields are the defaults.
	Limits Limits
}

// Disk is the free space check of DISK_LOW, in MiB (1 MB here is 1 048 576 bytes).
// With BlockSize set, the release's size is counted as the file system stores it:
// every file in whole blocks, every directory one block; with TotalInodes set, its
// files and directories must also find free inodes.
type Disk struct {
	// FreeMB is the free space under deploy_dir.
	FreeMB int64
	// MinFreeMB is the box's own min_free_mb from its config.
	MinFreeMB int64
	// BlockSize is the file system's block size in bytes; 0 counts bytes, not blocks.
	BlockSize int64
	// FreeInodes is the number of inodes free under deploy_dir; meaningful only when
	// TotalInodes is not 0.
	FreeInodes int64
	// TotalInodes is the file system's inode count; 0 skips the inode check (a file
	// system that does not count inodes reports none).
	TotalInodes int64
}

// Result is what Verify found. For a refused bundle it holds what could be
// computed; SHA is "" when the stream was too broken to compute it.
type Result struct {
	// SHA is the bundle sha (docs/BUNDLE.md).
	SHA string `json:"sha"`
	// Manifest is the decoded manifest (zero when there was none or it was not JSON).
	Manifest Manifest `json:"manifest"`
	// Size is the unpacked size in bytes: the sum of all regular files, manifest
	// included.
	Size int64 `json:"size"`
	// Files is the number of regular files, manifest.json included.
	Files int `json:"files"`
	// Services are the compose services, sorted.
	Services []string `json:"services,omitempty"`
	// Images are the images of Services, sorted by service: what an apply pulls
	// before its lease. Nil when the compose files could not be loaded.
	Images []Image `json:"images,omitempty"`
	// Refusals holds every refusal, sorted by code then detail; empty when accepted.
	Refusals []Refusal `json:"refusals"`
	// Warnings are compose's own warnings about the compose files (an obsolete
	// version key, a deprecated external.name), each naming the bundle's file. They
	// refuse nothing. Sorted; empty (never nil) when there is none or the compose
	// files were not checked.
	Warnings []string `json:"warnings"`
}

// Verify reads the bundle stream r once (a tar, or a gzip-compressed tar: detected by
// its magic bytes) and runs every check of docs/BUNDLE.md that does not need OpenBao:
// format and limits, paths, manifest, the sha, env, serial, disk, compose validity,
// unresolved variables and privileges.
//
// An accepted bundle returns (*Result, nil). A refused bundle returns a *Result
// whose Refusals lists every refusal, not just the first, and a *RefusedError with
// the same refusals (errors.Is(err, ErrRefused)). Any other error (ctx cancelled,
// the reader failed, an invalid Expect) is returned with a nil Result.
//
// Memory stays flat as the bundle grows: files are hashed as they stream, and only
// manifest.json and small files that may be compose files or env_files are kept,
// within Limits.MaxBufferSize.
func Verify(ctx context.Context, r io.Reader, exp Expect) (*Result, error) {
	if exp.EnvID == "" {
		return nil, fmt.Errorf("%w: Expect.EnvID is empty", ErrInvalidArgument)
	}
	want := strings.ToLower(exp.SHA)
	if want != "" && !ids.ValidSHA(want) {
		return nil, fmt.Errorf("%w: Expect.SHA is not 64 hex digits", ErrInvalidArgument)
	}
	v := &verifier{lim: exp.Limits.withDefaults(), buf: map[string][]byte{}, dropped: map[string]bool{}}
	sr, err := scan(ctx, r, exp.Limits, scanOpts{file: v.file})
	if err != nil {
		return nil, err
	}
	rs := &sr.rs
	res := &Result{Size: sr.total, Files: len(sr.files), Warnings: []string{}}
	if sr.complete && !sr.ambiguous {
		res.SHA = listingSHA(sr.files)
	}
	if want != "" && res.SHA != "" && res.SHA != want {
		rs.add(codes.SHAMismatch, "the bundle's sha is %s, tenancy asked for %s", res.SHA, want)
	}
	if sr.complete {
		v.checkManifest(ctx, sr, exp, res)
	}
	res.Refusals = rs.result()
	if len(res.Refusals) > 0 {
		return res, &RefusedError{SHA: res.SHA, Refusals: res.Refusals}
	}
	res.Refusals = []Refusal{}
	return res, nil
}

// verifier holds what Verify keeps while the stream passes.
type verifier struct {
	lim          Limits
	manifestSeen bool
	decoded      Manifest
	manifest     *Manifest // &decoded once decoded without BUNDLE_MALFORMED
	manifestRs   []Refusal
	compose      map[string]bool
	buf          map[string][]byte
	bufUsed      int64
	dropped      map[string]bool // candidates not kept for lack of buffer
}

// file is the scan callback for regular files with a safe path.
func (v *verifier) file(name string, size int64, r io.Reader, h hash.Hash, cbuf []byte) error {
	if name == ManifestName {
		v.manifestSeen = true
		if size > v.lim.MaxManifestSize {
			v.manifestRs = append(v.manifestRs, Refusal{codes.BundleMalformed,
				fmt.Sprintf("%s is %d bytes, over the limit of %d (MaxManifestSize)", ManifestName, size, v.lim.MaxManifestSize)})
			_, err := io.CopyBuffer(h, r, cbuf)
			return err
		}
		data, err := readAll(r, size, h)
		if err != nil {
			return err
		}
		v.decoded, v.manifestRs = decodeManifest(data)
		if !slices.ContainsFunc(v.manifestRs, func(r Refusal) bool { return r.Code == codes.BundleMalformed }) {
			v.manifest = &v.decoded
			v.compose = map[string]bool{}
			for _, f := range v.decoded.ComposeFiles {
				v.compose[f] = true
			}
		}
		return nil
	}
	isCompose := v.compose[name]
	if size > v.lim.MaxComposeFileSize || (!isCompose && !v.mayBeEnvFile(name)) {
		_, err := io.CopyBuffer(h, r, cbuf)
		return err
	}
	if v.bufUsed+size > v.lim.MaxBufferSize && isCompose {
		v.evict(size)
	}
	if v.bufUsed+size > v.lim.MaxBufferSize {
		v.dropped[name] = true
		_, err := io.CopyBuffer(h, r, cbuf)
		return err
	}
	data, err := readAll(r, size, h)
	if err != nil {
		return err
	}
	v.buf[name] = data
	v.bufUsed += size
	return nil
}

// mayBeEnvFile reports whether a file that is not a compose file could be an
// env_file of one or an ignore file of a build context. Until the manifest and every
// compose file are known, any small file could be; after that a .dockerignore or
// <dockerfile>.dockerignore (the build-context check reads them) and a file whose
// base name appears in a compose file.
func (v *verifier) mayBeEnvFile(name string) bool {
	if v.manifest == nil || composecheck.IsDockerignore(name) {
		return true
	}
	base := path.Base(name)
	for _, f := range v.manifest.ComposeFiles {
		content, ok := v.buf[f]
		if !ok {
			return true
		}
		if bytes.Contains(content, []byte(base)) {
			return true
		}
	}
	return false
}

// evict drops buffered files that are not compose files until need more bytes fit.
// It runs once the manifest is known.
func (v *verifier) evict(need int64) {
	if v.manifest == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(v.buf)) {
		if v.bufUsed+need <= v.lim.MaxBufferSize {
			return
		}
		if !v.compose[name] {
			v.bufUsed -= int64(len(v.buf[name]))
			delete(v.buf, name)
			v.dropped[name] = true
		}
	}
}

func readAll(r io.Reader, size int64, h hash.Hash) ([]byte, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	h.Write(data)
	return data, nil
}
