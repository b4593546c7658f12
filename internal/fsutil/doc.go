// Package fsutil provides the file-system primitives monky-deployd builds on: atomic
// file writes, the bounded read of a file that must be regular, the run lock, the
// atomic swap of the current-release symlink and the free-space probe.
//
// Every file the agent writes goes through WriteFileAtomic or WriteAtomic (docs/ARCHITECTURE.md): the
// content is written to a temporary file in the same directory, created exclusively
// (O_EXCL) with its final mode from the start and chmod-ed after the create so that the
// process umask cannot widen or narrow it, then fsync-ed, renamed over the destination
// and the directory is fsync-ed. A crash at any point leaves either the old or the new
// content under the destination name, never a half-written file. Temporary files are
// named ".<base>.tmp-<random>" so that an operator recognises a leftover of a crash
// (kill -9 between create and rename) and a later write never collides with it.
//
// ReadRegular reads the files an operator hands the agent (the config, the grant, the
// token, the state): it refuses at once what is not a regular file (a fifo would make a
// blocking open or read hang), naming the path and its kind, and bounds the size.
//
// TryLock takes flock(2) LOCK_EX|LOCK_NB. The lock belongs to the open file description,
// so it is released when the process exits for any reason (kill -9 included) and a second
// TryLock on the same path fails with ErrLocked even inside the same process.
//
// The package is Unix-only (Linux and macOS): it uses flock(2) and statfs(2).
package fsutil
