package bundle

import (
	"context"
	"maps"
	"path"
	"slices"

	"github.com/monky/monky-deployd/deployd/codes"
)

// checkManifest runs the checks that need the manifest and the complete list of the
// tar's files. The scan was complete.
func (v *verifier) checkManifest(ctx context.Context, sr *scanResult, exp Expect, res *Result) {
	rs := &sr.rs
	if !v.manifestSeen {
		if !slices.ContainsFunc(sr.files, func(f fileSum) bool { return f.path == ManifestName }) {
			rs.add(codes.BundleMalformed, "no %s in the bundle", ManifestName)
		}
		return
	}
	for _, r := range v.manifestRs {
		rs.add(r.Code, "%s", r.Detail)
	}
	res.Manifest = v.decoded
	m := v.manifest
	if m == nil {
		return
	}
	checkBox(m, exp, sr.files, rs)
	checkVarsRenderable(m.Vars, rs)
	inTar := checkFilesListed(m, sr.files, rs)
	if !v.composeKept(m, sr.files, inTar, rs) {
		return
	}
	c := checkCompose(ctx, m, v.buf, exp)
	for _, r := range c.refusals {
		rs.add(r.Code, "%s", r.Detail)
	}
	if c.every != nil {
		checkHookServices(m, c.every, rs)
	}
	res.Services = c.services
	res.Images = c.images
	if c.warnings != nil {
		res.Warnings = c.warnings
	}
}

// checkBox checks the manifest against the box: its env, the live serial, free space.
func checkBox(m *Manifest, exp Expect, files []fileSum, rs *refusals) {
	if m.EnvID != exp.EnvID {
		rs.add(codes.EnvMismatch, "%s: env_id is %s, this box is %s", ManifestName, m.EnvID, exp.EnvID)
	}
	if exp.LiveSerial > 0 && m.Serial < exp.LiveSerial && !exp.Rollback {
		rs.add(codes.Rollback, "%s: serial %d is lower than the live release's %d and the check-in did not ask for a rollback",
			ManifestName, m.Serial, exp.LiveSerial)
	}
	if d := exp.Disk; d != nil {
		checkDisk(m, *d, files, rs)
	}
}

// checkDisk is DISK_LOW: the free space under deploy_dir must hold the largest of the
// box's and the manifest's min_free_mb and twice the unpacked release (a staging
// copy next to the live one), counted in blocks when the block size is known, and
// the free inodes twice its files and directories.
func checkDisk(m *Manifest, d Disk, files []fileSum, rs *refusals) {
	const mib = 1 << 20
	used, inodes := onDisk(files, d.BlockSize)
	twice := (2*used + mib - 1) / mib
	need := max(d.MinFreeMB, m.MinFreeMB, twice)
	if d.FreeMB < need {
		rs.add(codes.DiskLow, "%d MiB free under deploy_dir, the release needs %d MiB (max of the box's min_free_mb %d, the manifest's min_free_mb %d, twice the unpacked size %d)",
			d.FreeMB, need, d.MinFreeMB, m.MinFreeMB, twice)
	}
	if d.TotalInodes > 0 && d.FreeInodes < 2*inodes {
		rs.add(codes.DiskLow, "%d inodes free under deploy_dir, the release needs %d (twice its %d files and directories)",
			d.FreeInodes, 2*inodes, inodes)
	}
}

// onDisk is what the release's files take once unpacked: bytes (in whole blocks of
// blockSize when it is set, a directory one block) and inodes (files, directories,
// the release directory and its .env).
func onDisk(files []fileSum, blockSize int64) (bytes, inodes int64) {
	dirs := map[string]bool{}
	for _, f := range files {
		bytes += roundUp(f.size, blockSize)
		for dir := path.Dir(f.path); dir != "." && !dirs[dir]; dir = path.Dir(dir) {
			dirs[dir] = true
		}
	}
	const releaseDirAndEnv = 2
	inodes = int64(len(files)+len(dirs)) + releaseDirAndEnv
	if blockSize > 0 {
		bytes += int64(len(dirs)+1) * blockSize
	}
	return bytes, inodes
}

// roundUp is n in whole blocks of size bs; n itself when bs is not positive.
func roundUp(n, bs int64) int64 {
	if bs <= 0 {
		return n
	}
	return (n + bs - 1) / bs * bs
}

// checkFilesListed checks that files equals the tar's regular files minus
// manifest.json, exactly, and returns the set of the tar's (safe) files.
func checkFilesListed(m *Manifest, files []fileSum, rs *refusals) map[string]bool {
	inTar := make(map[string]bool, len(files))
	for _, f := range files {
		if f.path != ManifestName && checkPath(f.path) == "" {
			inTar[f.path] = true
		}
	}
	listed := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		listed[f] = true
		if checkPath(f) == "" && f != ManifestName && !inTar[f] {
			rs.add(codes.ManifestPaths, "files: %q is listed but not in the bundle", f)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(inTar)) {
		if !listed[f] {
			rs.add(codes.ManifestPaths, "%q is in the bundle but not in files", f)
		}
	}
	return inTar
}

// composeKept reports whether every compose file is in the tar and was kept in
// memory for the compose checks, refusing one that was not kept.
func (v *verifier) composeKept(m *Manifest, files []fileSum, inTar map[string]bool, rs *refusals) bool {
	ok := true
	for _, f := range m.ComposeFiles {
		if _, kept := v.buf[f]; kept || !inTar[f] {
			if !inTar[f] {
				ok = false
			}
			continue
		}
		ok = false
		size := int64(0)
		for _, sf := range files {
			if sf.path == f {
				size = sf.size
			}
		}
		if size > v.lim.MaxComposeFileSize {
			rs.add(codes.BundleMalformed, "compose file %q is %d bytes, over the limit of %d (MaxComposeFileSize)", f, size, v.lim.MaxComposeFileSize)
		} else {
			rs.add(codes.BundleMalformed, "compose file %q was not kept for the compose checks: the buffer budget (MaxBufferSize %d) ran out before %s was read; put %s first in the tar",
				f, v.lim.MaxBufferSize, ManifestName, ManifestName)
		}
	}
	return ok
}

// composeProject is the compose project name used when Expect.ProjectName is "".
const composeProject = "monky"
