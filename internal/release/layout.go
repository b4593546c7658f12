package release

// What a box serves and how a deploy directory is laid out: the Live triple, the
// current symlink and the short form of a sha.

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/monky/monky-deployd/deployd/ids"
)

// Live is what a box serves: the release current points to, the release that was
// live before it (restored when an apply fails after promote), and whether the live
// release was seen healthy. The zero Live is a box that serves nothing.
type Live struct {
	// SHA is the live release, "" when nothing is live.
	SHA string
	// Serial is the live release's manifest serial, 0 when nothing is live.
	Serial int64
	// Previous is the release live before SHA, "" when there was none.
	Previous string
	// Confirmed is true once the live release came up healthy.
	Confirmed bool
}

// Dirs is the layout of one deploy directory: releases/<sha>/ and current.
type Dirs struct {
	// DeployDir holds releases/ and the current symlink.
	DeployDir string
}

// Releases is the directory of the staged releases.
func (d Dirs) Releases() string { return filepath.Join(d.DeployDir, "releases") }

// Dir is the directory of the release sha.
func (d Dirs) Dir(sha string) string { return filepath.Join(d.Releases(), sha) }

// CurrentLink is the path of the current symlink.
func (d Dirs) CurrentLink() string { return filepath.Join(d.DeployDir, "current") }

// Has reports whether the release sha is staged.
func (d Dirs) Has(sha string) bool {
	if !ids.ValidSHA(sha) {
		return false
	}
	fi, err := os.Stat(d.Dir(sha))
	return err == nil && fi.IsDir()
}

// Current is the sha that current points to, "" when there is none (or it points at
// something that is not a staged release).
func (d Dirs) Current() string {
	target, err := os.Readlink(d.CurrentLink())
	if err != nil {
		return ""
	}
	sha := filepath.Base(target)
	if !d.Has(sha) {
		return ""
	}
	return sha
}

// Tidy reports whether releases/ holds no leftover of an interrupted apply (a hidden
// entry: a download, a staging directory, a release moved aside), which the release
// store's repair would have to clear. A releases/ that cannot be read is not tidy.
func (d Dirs) Tidy() bool {
	entries, err := os.ReadDir(d.Releases())
	if os.IsNotExist(err) {
		return true
	}
	if err != nil {
		return false
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			return false
		}
	}
	return true
}

// Short is a release's sha as logs and details name it: its first 12 characters.
func Short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
