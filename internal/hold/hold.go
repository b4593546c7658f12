// Package hold reads and writes the hold file: a person at the box asking the agent
// not to switch it to a new release until a time (docs/OPERATIONS.md, "Holds and
// windows").
//
// The hold lives in its own file in its own directory (Config.Holds.Dir, by default
// /var/lib/monky-deployd-hold, mode 2770 root:monky-hold), never in state.json, so
// that the members of the hold group may set one without reading the agent's state,
// token or secrets. The agent runs as root and reads a file other users wrote: Read
// refuses what it must not trust (a link, what is not a regular file, a file larger
// than MaxSize, one whose owner is not the uid it names, one others may write, or one
// that does not parse) with a *RefusedError, and the agent then ignores it.
package hold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/monky/monky-deployd/internal/fsutil"
)

// FileName is the hold file's name in the hold directory.
const FileName = "hold.json"

// MaxSize bounds the hold file: a hold is a few hundred bytes.
const MaxSize = 4 << 10

// MaxReason bounds the reason, in bytes.
const MaxReason = 200

// MaxOwner bounds the owner's name, in bytes.
const MaxOwner = 64

// Hold is one hold: who set it, why, when, and until when it was asked for. The
// agent ends it earlier when it is longer than holds.max (End).
type Hold struct {
	// Owner is the user who set it, by name (the uid's name when it has one, else the
	// uid as a number).
	Owner string `json:"owner"`
	// UID is the user id of the process that set it; the file must be owned by it.
	UID int `json:"uid"`
	// Reason is what the person said ("demo at 3"); printable UTF-8, at most MaxReason
	// bytes.
	Reason string `json:"reason"`
	// SetAt is when it was set.
	SetAt time.Time `json:"set_at"`
	// Until is when it was asked to end; after SetAt.
	Until time.Time `json:"until"`
}

// End is when h ends when holds are capped at max: Until, or SetAt+max when that is
// earlier. max ≤ 0 caps nothing.
func (h Hold) End(max time.Duration) time.Time {
	if max > 0 && h.Until.Sub(h.SetAt) > max {
		return h.SetAt.Add(max)
	}
	return h.Until
}

// Active reports whether h holds the box at now, capped at max.
func (h Hold) Active(now time.Time, max time.Duration) bool {
	return !now.Before(h.SetAt.Add(-time.Minute)) && now.Before(h.End(max))
}

// Cut reports whether max shortens h.
func (h Hold) Cut(max time.Duration) bool { return !h.End(max).Equal(h.Until) }

// Path is the hold file in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// ErrNone is returned by Read when there is no hold file.
var ErrNone = errors.New("no hold")

// RefusedError is a hold file the agent does not trust; it is ignored.
type RefusedError struct {
	// Path is the hold file.
	Path string
	// Why says what is wrong, without the file's content.
	Why string
}

// Error returns "hold file <path> refused: <why>".
func (e *RefusedError) Error() string { return "hold file " + e.Path + " refused: " + e.Why }

// Parse decodes a hold file's content strictly: one JSON object of exactly the known
// fields, an owner, a uid ≥ 0, a printable reason within MaxReason bytes, and Until
// after SetAt. Its errors say which field is wrong, never its value.
func Parse(data []byte) (Hold, error) {
	if len(data) > MaxSize {
		return Hold{}, fmt.Errorf("larger than %d bytes", MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w struct {
		Owner  *string `json:"owner"`
		UID    *int    `json:"uid"`
		Reason *string `json:"reason"`
		SetAt  *string `json:"set_at"`
		Until  *string `json:"until"`
	}
	if err := dec.Decode(&w); err != nil {
		return Hold{}, errors.New("not a JSON object of owner, uid, reason, set_at and until")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Hold{}, errors.New("more than one JSON value")
	}
	switch {
	case w.Owner == nil || *w.Owner == "" || len(*w.Owner) > MaxOwner || !printable(*w.Owner):
		return Hold{}, fmt.Errorf("field owner must be a printable name of 1 to %d bytes", MaxOwner)
	case w.UID == nil || *w.UID < 0:
		return Hold{}, errors.New("field uid must be a user id (≥ 0)")
	case w.Reason == nil || len(*w.Reason) > MaxReason || !printable(*w.Reason):
		return Hold{}, fmt.Errorf("field reason must be printable text of at most %d bytes", MaxReason)
	}
	h := Hold{Owner: *w.Owner, UID: *w.UID, Reason: *w.Reason}
	var err error
	if h.SetAt, err = parseTime("set_at", w.SetAt); err != nil {
		return Hold{}, err
	}
	if h.Until, err = parseTime("until", w.Until); err != nil {
		return Hold{}, err
	}
	if !h.Until.After(h.SetAt) {
		return Hold{}, errors.New("field until must be after set_at")
	}
	return h, nil
}

func parseTime(field string, s *string) (time.Time, error) {
	if s == nil {
		return time.Time{}, fmt.Errorf("field %s is required", field)
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil || t.Year() < 2000 || t.Year() > 9999 {
		return time.Time{}, fmt.Errorf("field %s must be an RFC 3339 time", field)
	}
	return t, nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) })
}

// Marshal is h as Write stores it: Hold's own JSON, its times in UTC (RFC 3339 with
// nanoseconds). A time past year 9999 does not marshal; Write refuses it (Parse does).
func Marshal(h Hold) []byte {
	h.SetAt, h.Until = h.SetAt.UTC(), h.Until.UTC()
	data, _ := json.Marshal(h)
	return append(data, '\n')
}

// Read reads the hold file in dir. No file is ErrNone. A file the agent must not
// trust is a *RefusedError: a symlink or anything but a regular file, more than
// MaxSize bytes, more than one link, writable by others, owned by another uid than
// the one it names, or content Parse refuses. The file is opened without following
// a link and without blocking, and checked through that descriptor, so that a path
// swapped between the checks is refused too. Other errors (the directory cannot be
// read) are returned as they are.
func Read(dir string) (Hold, error) {
	p := Path(dir)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Hold{}, ErrNone
	case errors.Is(err, syscall.ELOOP):
		return Hold{}, &RefusedError{Path: p, Why: "it is a symlink; a hold is a regular file"}
	case err != nil:
		return Hold{}, err
	}
	defer func() { _ = f.Close() }() // read-only
	fi, err := f.Stat()
	if err != nil {
		return Hold{}, err
	}
	if why := untrusted(fi); why != "" {
		return Hold{}, &RefusedError{Path: p, Why: why}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return Hold{}, &RefusedError{Path: p, Why: "cannot read: " + fsutil.PathCause(err).Error()}
	}
	if len(data) > MaxSize {
		return Hold{}, &RefusedError{Path: p, Why: fmt.Sprintf("larger than %d bytes", MaxSize)}
	}
	h, err := Parse(data)
	if err != nil {
		return Hold{}, &RefusedError{Path: p, Why: "malformed: " + err.Error()}
	}
	if uid, ok := ownerOf(fi); ok && uid != h.UID {
		return Hold{}, &RefusedError{Path: p, Why: fmt.Sprintf("written by uid %d, but it names uid %d as its owner", uid, h.UID)}
	}
	return h, nil
}

// untrusted says why the opened file fi is not a hold file to trust; "" when it is.
func untrusted(fi fs.FileInfo) string {
	switch {
	case !fi.Mode().IsRegular():
		return "it is a " + fsutil.KindOf(fi.Mode()) + ", not a regular file"
	case fi.Size() > MaxSize:
		return fmt.Sprintf("larger than %d bytes", MaxSize)
	case fi.Mode().Perm()&0o002 != 0:
		return "others may write it (mode " + fmt.Sprintf("%04o", fi.Mode().Perm()) + ")"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return "it has more than one hard link"
	}
	return ""
}

// ownerOf is the uid that owns fi, when the system says.
func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// Write stores h as the hold file in dir, atomically (a temporary file renamed over
// it), mode 0640: the hold group reads it.
func Write(dir string, h Hold) error {
	if _, err := Parse(Marshal(h)); err != nil {
		return fmt.Errorf("hold: not a hold to write: %w", err)
	}
	return fsutil.WriteFileAtomic(Path(dir), Marshal(h), 0o640)
}

// Clear removes the hold file in dir; no file is no error.
func Clear(dir string) error {
	err := os.Remove(Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Stamp is what the hold file is at one moment, cheap to read (one lstat): a loop
// compares two stamps to learn that a hold was set, changed or cleared.
type Stamp struct {
	exists bool
	mod    time.Time
	size   int64
	ino    uint64
}

// StampOf is the stamp of the hold file in dir; a file that cannot be stat-ed is the
// stamp of none.
func StampOf(dir string) Stamp {
	fi, err := os.Lstat(Path(dir))
	if err != nil {
		return Stamp{}
	}
	s := Stamp{exists: true, mod: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s
}
