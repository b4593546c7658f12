package secret

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
)

// Handler wraps h so that no registered secret reaches it. Before h sees a record, the
// message and every attribute are redacted: attribute keys, strings, numbers whose text is
// a secret, errors (through Error), fmt.Stringer values and any other value (formatted
// with %v, so the inner handler receives a string), recursively inside groups, after
// LogValuer values have been resolved. Attributes given to WithAttrs are kept unredacted
// and redacted against the current set of secrets whenever that set changes, so a secret
// registered after a logger.With call is still caught.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	return &redactHandler{r: r, base: h, cache: new(atomic.Pointer[builtHandler])}
}

// redactHandler is the slog.Handler returned by Redactor.Handler.
type redactHandler struct {
	r     *Redactor
	base  slog.Handler
	ops   []handlerOp // WithGroup/WithAttrs calls, in order, unredacted
	cache *atomic.Pointer[builtHandler]
}

// handlerOp is one WithGroup (attrs nil) or WithAttrs call.
type handlerOp struct {
	group string
	attrs []slog.Attr
}

// builtHandler is base with ops applied, redacted against one generation of secrets.
type builtHandler struct {
	state *compiled
	h     slog.Handler
}

var _ slog.Handler = (*redactHandler)(nil)

// inner returns the wrapped handler with the WithGroup/WithAttrs calls applied and their
// attributes redacted against c, rebuilt when the secrets have changed since last time.
func (h *redactHandler) inner(c *compiled) slog.Handler {
	if len(h.ops) == 0 {
		return h.base
	}
	if b := h.cache.Load(); b != nil && b.state == c {
		return b.h
	}
	in := h.base
	for _, op := range h.ops {
		if op.attrs == nil {
			in = in.WithGroup(op.group)
			continue
		}
		in = in.WithAttrs(redactAttrs(c, op.attrs))
	}
	h.cache.Store(&builtHandler{state: c, h: in})
	return in
}

// Enabled reports whether the wrapped handler handles records at level.
func (h *redactHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner(h.r.load()).Enabled(ctx, level)
}

// Handle redacts the record and passes it to the wrapped handler.
func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	c := h.r.load()
	out := slog.NewRecord(rec.Time, rec.Level, c.redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(c, a))
		return true
	})
	return h.inner(c).Handle(ctx, out)
}

// WithAttrs returns a handler that adds attrs, redacted, to every record.
func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(handlerOp{attrs: attrs})
}

// WithGroup returns a handler that puts the following attributes into the group name.
func (h *redactHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(handlerOp{group: name})
}

func (h *redactHandler) with(op handlerOp) *redactHandler {
	ops := make([]handlerOp, len(h.ops), len(h.ops)+1)
	copy(ops, h.ops)
	return &redactHandler{r: h.r, base: h.base, ops: append(ops, op), cache: new(atomic.Pointer[builtHandler])}
}

// redact is Redact against one generation.
func (c *compiled) redact(s string) string {
	iv := c.find(s)
	if len(iv) == 0 {
		return s
	}
	return string(appendMasked(make([]byte, 0, len(s)+len(iv)*len(Mask)), []byte(s), iv))
}

func redactAttrs(c *compiled, attrs []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = redactAttr(c, a)
	}
	return out
}

// redactAttr returns a with its key and value redacted; LogValuer values are resolved
// first.
func redactAttr(c *compiled, a slog.Attr) slog.Attr {
	a.Key = c.redact(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(c.redact(v.String()))
	case slog.KindGroup:
		a.Value = slog.GroupValue(redactAttrs(c, v.Group())...)
	case slog.KindInt64, slog.KindUint64, slog.KindFloat64:
		a.Value = v
		if s := v.String(); c.redact(s) != s {
			a.Value = slog.StringValue(c.redact(s))
		}
	case slog.KindAny:
		if v.Any() == nil {
			a.Value = v
			break
		}
		// %v prefers Error and String and recovers from their panics.
		a.Value = slog.StringValue(c.redact(fmt.Sprint(v.Any())))
	default: // bool, duration, time: no text of their own
		a.Value = v
	}
	return a
}
