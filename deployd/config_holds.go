package deployd

import (
	"errors"
	"fmt"
	"time"

	"github.com/monky/monky-deployd/internal/window"
)

// maxWindows bounds the windows of a config.
const maxWindows = 32

// minHoldMax is the shortest holds.max: a cap below a minute is a typo.
const minHoldMax = time.Minute

// holds checks the holds block.
func (v *cfgValidator) holds(h HoldsConfig) {
	v.absPath("holds.dir", h.Dir, true)
	if time.Duration(h.Max) < minHoldMax {
		v.fail("holds.max", "must be at least %s, got %s", minHoldMax, h.Max)
	}
}

// windows checks every window.
func (v *cfgValidator) windows(ws []WindowConfig) {
	if len(ws) > maxWindows {
		v.fail("windows", "at most %d windows, got %d", maxWindows, len(ws))
		return
	}
	for i, w := range ws {
		key := fmt.Sprintf("windows[%d]", i+1)
		if _, err := w.parse(); err != nil {
			v.fail(key, "%v", err)
		}
	}
}

// parse is w as a window.Window, in the box's zone when it names none.
func (w WindowConfig) parse() (window.Window, error) {
	if w.Days == "" || w.From == "" || w.To == "" {
		return window.Window{}, errors.New("days, from and to are required")
	}
	return window.Parse(w.Days, w.From, w.To, w.TZ, time.Local)
}

// windowSet is the config's windows; the empty set (no windows) is always open. A
// window that does not parse was refused by Validate; it is left out here.
func (c Config) windowSet() window.Set {
	set := make(window.Set, 0, len(c.Windows))
	for _, w := range c.Windows {
		if pw, err := w.parse(); err == nil {
			set = append(set, pw)
		}
	}
	return set
}
