package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/internal/hold"
	"github.com/monky/monky-deployd/internal/release"
)

// holdGroup is the group the packages create: its members (and root) may set and
// clear holds (docs/OPERATIONS.md, "Holds and windows").
const holdGroup = "monky-hold"

// hold is `monky-deployd hold`: with --for, set a hold (one line back: until when,
// and what waits); with --clear, clear it; with neither, show it.
func (c *cli) hold(args []string) int {
	fs := c.flags("hold")
	configPath := fs.String("config", deployd.DefaultConfigPath, "config file (holds.dir, holds.max); unreadable: the defaults")
	forD := fs.Duration("for", 0, "set a hold for this long (cut to holds.max)")
	reason := fs.String("reason", "", "with --for: why, e.g. \"demo at 3\" (required)")
	clear := fs.Bool("clear", false, "clear the hold: the agent switches at its next tick, started at once")
	if code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	switch {
	case *clear && (*forD != 0 || *reason != ""):
		return c.usageError(fs, "--clear takes neither --for nor --reason")
	case *forD < 0:
		return c.usageError(fs, "--for must be positive")
	case *forD > 0 && *reason == "":
		return c.usageError(fs, "--for needs --reason: say why the box is held")
	case *forD == 0 && *reason != "":
		return c.usageError(fs, "--reason needs --for")
	case len(*reason) > hold.MaxReason:
		return c.usageError(fs, fmt.Sprintf("--reason is longer than %d bytes", hold.MaxReason))
	}
	cfg, ok := c.holdConfig(*configPath)
	if !ok {
		return deployd.ExitFailed
	}
	switch {
	case *clear:
		return c.clearHold(cfg)
	case *forD > 0:
		return c.setHold(cfg, *forD, *reason)
	default:
		return c.showHold(cfg)
	}
}

// usageError says what is wrong with a command's flags and exits 2.
func (c *cli) usageError(fs interface{ Name() string }, msg string) int {
	_, _ = fmt.Fprintf(c.stderr, "%s: %s\n", fs.Name(), msg)
	return exitUsage
}

// holdConfig is the config the hold command needs: a member of the hold group may not
// read the config (mode 0640 root), so an unreadable config is the defaults; an
// invalid one is an error.
func (c *cli) holdConfig(path string) (deployd.Config, bool) {
	cfg, err := deployd.LoadConfig(path)
	switch {
	case err == nil:
		return cfg, true
	case errors.Is(err, fs.ErrPermission):
		c.log.Debug("the config cannot be read by this user; using the default holds.dir and holds.max", "config", path)
		return deployd.DefaultConfig(), true
	default:
		c.log.Error("the config is invalid; fix it and run again", "config", path, "code", deployd.CodeOf(err), "err", err)
		return deployd.Config{}, false
	}
}

// setHold writes a hold of the calling user for d (cut to holds.max) with reason.
func (c *cli) setHold(cfg deployd.Config, d time.Duration, reason string) int {
	now := time.Now()
	max := time.Duration(cfg.Holds.Max)
	h := hold.Hold{Owner: userName(os.Getuid()), UID: os.Getuid(), Reason: reason, SetAt: now.Truncate(time.Second), Until: now.Add(d).Truncate(time.Second)}
	cut := h.Cut(max)
	h.Until = h.End(max)
	if err := hold.Write(cfg.Holds.Dir, h); err != nil {
		return c.holdWriteFailed(cfg, "set", err)
	}
	line := fmt.Sprintf("held until %s", localTime(h.Until))
	if cut {
		line += fmt.Sprintf(" (cut to holds.max, %s)", max)
	}
	return c.output(line + "; " + waitingLine(cfg) + "\n")
}

// clearHold removes the hold file.
func (c *cli) clearHold(cfg deployd.Config) int {
	if err := hold.Clear(cfg.Holds.Dir); err != nil {
		return c.holdWriteFailed(cfg, "clear", err)
	}
	return c.output("hold cleared; the agent checks in and switches within seconds (" + waitingLine(cfg) + ")\n")
}

// holdWriteFailed says why a hold could not be set or cleared and exits 1.
func (c *cli) holdWriteFailed(cfg deployd.Config, what string, err error) int {
	switch {
	case errors.Is(err, fs.ErrPermission):
		c.log.Error("could not "+what+" the hold: only root and the members of group "+holdGroup+" may; ask an admin to add you (usermod -aG "+holdGroup+" USER, then log in again)",
			"dir", cfg.Holds.Dir, "err", err)
	case errors.Is(err, fs.ErrNotExist):
		c.log.Error("could not "+what+" the hold: the hold directory does not exist; the monky-deployd package creates it (reinstall it, or create it mode 2770 root:"+holdGroup+")",
			"dir", cfg.Holds.Dir, "err", err)
	default:
		c.log.Error("could not "+what+" the hold", "dir", cfg.Holds.Dir, "err", err)
	}
	return deployd.ExitFailed
}

// showHold prints the hold, and what waits.
func (c *cli) showHold(cfg deployd.Config) int {
	h, err := hold.Read(cfg.Holds.Dir)
	var refused *hold.RefusedError
	max := time.Duration(cfg.Holds.Max)
	var line string
	switch {
	case errors.Is(err, hold.ErrNone):
		line = "no hold"
	case errors.As(err, &refused):
		line = "the hold file is refused and the agent ignores it (" + refused.Why + "); clear it with `monky-deployd hold --clear` and set it again"
	case err != nil:
		c.log.Error("could not read the hold", "dir", cfg.Holds.Dir, "err", err)
		return deployd.ExitFailed
	case !h.Active(time.Now(), max):
		line = fmt.Sprintf("no hold (the hold of %s ended at %s)", h.Owner, localTime(h.End(max)))
	default:
		line = fmt.Sprintf("held until %s by %s: %s", localTime(h.End(max)), h.Owner, h.Reason)
	}
	return c.output(line + "; " + waitingLine(cfg) + "\n")
}

// waitingLine says what waits for the switch: the agent's note in the hold
// directory, or the state when this user can read it.
func waitingLine(cfg deployd.Config) string {
	d, ok := deployd.ReadDeferredNote(cfg.Holds.Dir)
	if !ok {
		if st, err := deployd.ReadState(cfg); err == nil && st.Deferral != nil {
			d, ok = *st.Deferral, true
		}
	}
	if !ok {
		return "waiting: nothing yet (the next check-in tells whether a release is published)"
	}
	s := fmt.Sprintf("waiting: %s (serial %d), deferred since %s", release.Short(d.SHA), d.Serial, localTime(d.Since))
	if d.Prepared {
		s += ", prepared"
	}
	return s
}

// localTime is t in the box's zone, for a person.
func localTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04 MST") }

// userName is the name of uid, or the uid as a number when it has none.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(uid)
}
