package logging

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
)

// Options configures NewHandler. The zero Options logs text at level info, with
// timestamps.
type Options struct {
	// Level is the minimum level logged; nil means slog.LevelInfo.
	Level slog.Leveler
	// Journal prefixes each line with its sd-daemon(3) priority ("<6>" for info) and
	// drops the timestamp, for stderr connected to the systemd journal.
	Journal bool
	// JSON writes one JSON object per line instead of logfmt text.
	JSON bool
}

// Priority returns the sd-daemon(3) syslog priority of a slog level: 3 (err) from
// slog.LevelError up, 4 (warning) from slog.LevelWarn, 6 (info) from slog.LevelInfo and
// 7 (debug) below.
func Priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	default:
		return 7
	}
}

// NewHandler returns a handler that writes one line per record to w. Each record is
// written with a single Write call; the handler is safe for concurrent use.
func NewHandler(w io.Writer, opts Options) slog.Handler {
	ho := &slog.HandlerOptions{Level: opts.Level}
	if !opts.Journal {
		if opts.JSON {
			return slog.NewJSONHandler(w, ho)
		}
		return slog.NewTextHandler(w, ho)
	}
	ho.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	st := &journalState{w: w}
	var inner slog.Handler
	if opts.JSON {
		inner = slog.NewJSONHandler(&st.buf, ho)
	} else {
		inner = slog.NewTextHandler(&st.buf, ho)
	}
	return &journalHandler{st: st, inner: inner}
}

// journalState is shared by a journal handler and the handlers derived from it: the
// inner handlers format into buf while mu is held, and the line is written to w with its
// priority prefix.
type journalState struct {
	mu  sync.Mutex
	buf bytes.Buffer
	w   io.Writer
}

// journalHandler prefixes each record's line with its priority.
type journalHandler struct {
	st    *journalState
	inner slog.Handler
}

var _ slog.Handler = (*journalHandler)(nil)

// Enabled reports whether the level is logged.
func (h *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle writes "<N>" and the formatted record as one line.
func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	h.st.buf.Reset()
	h.st.buf.WriteByte('<')
	h.st.buf.WriteString(strconv.Itoa(Priority(r.Level)))
	h.st.buf.WriteByte('>')
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	_, err := h.st.w.Write(h.st.buf.Bytes())
	return err
}

// WithAttrs returns a handler whose records carry attrs.
func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &journalHandler{st: h.st, inner: h.inner.WithAttrs(attrs)}
}

// WithGroup returns a handler that nests the following attributes in group name.
func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{st: h.st, inner: h.inner.WithGroup(name)}
}

// ForAgent is the logger of the agent binary: logfmt on stderr (with sd-daemon priorities
// and no timestamp when JOURNAL_STREAM says stderr is the journal), debug when
// MONKY_DEPLOYD_DEBUG is set in env, every record through wrap (the redactor's
// handler).
func ForAgent(stderr io.Writer, env map[string]string, wrap func(slog.Handler) slog.Handler) *slog.Logger {
	level := slog.LevelInfo
	if env["MONKY_DEPLOYD_DEBUG"] != "" {
		level = slog.LevelDebug
	}
	return slog.New(wrap(NewHandler(stderr, Options{Level: level, Journal: env["JOURNAL_STREAM"] != ""})))
}
