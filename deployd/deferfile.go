package deployd

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/monky/monky-deployd/internal/fsutil"
)

// DeferredFileName is the agent's note of what waits, in the hold directory: the
// hold command, run by a member of the hold group who cannot read state.json, tells
// from it what waits.
const DeferredFileName = "deferred.json"

// maxDeferredFile bounds the note a reader takes.
const maxDeferredFile = 4 << 10

// publishDeferral writes d (nil: removes the note) to the hold directory. A hold
// directory that does not exist (no package set it up) is no error: nothing is
// written.
func (a *Agent) publishDeferral(d *Deferral) {
	dir := a.cfg.Holds.Dir
	if _, err := os.Stat(dir); err != nil {
		return
	}
	p := filepath.Join(dir, DeferredFileName)
	if d == nil {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("could not remove the deferral note in the hold directory", "path", p, "err", err)
		}
		return
	}
	data, _ := json.Marshal(d) // strings, ints, times and a bool always marshal
	if err := fsutil.WriteFileAtomic(p, append(data, '\n'), 0o644); err != nil {
		a.log.Warn("could not write the deferral note in the hold directory; `monky-deployd hold` cannot say what waits", "path", p, "err", err)
	}
}

// ReadDeferredNote reads the agent's note of what waits from the hold directory dir;
// false when there is none or it does not parse (it is only shown).
func ReadDeferredNote(dir string) (Deferral, bool) {
	data, err := fsutil.ReadRegular(filepath.Join(dir, DeferredFileName), maxDeferredFile)
	if err != nil {
		return Deferral{}, false
	}
	var d Deferral
	if json.Unmarshal(data, &d) != nil || d.SHA == "" {
		return Deferral{}, false
	}
	return d, true
}
