package logging

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
)

// RouteLogrus points l at logger: every entry becomes one slog record at the mapped
// level (trace → debug-4, debug → debug, info → info, warning → warn, error → error,
// fatal → error+4, panic → error+8) with the entry's time, its message (a trailing
// newline trimmed) and its fields as attributes, sorted by key; an error field keeps its
// error value. l's output is discarded and its formatter does nothing, so nothing is
// written to raw stderr; its other hooks are removed.
//
// l's level is set to the most verbose level logger accepts at the time of the call, so
// that chatty libraries do not format entries that would be dropped; call RouteLogrus
// again when logger's level changes. If a library later calls SetOutput or SetFormatter
// on l, its entries still reach logger through the hook, but they are also written
// where that library says.
//
// Only cmd/ calls this with logrus.StandardLogger(); a nil logger discards.
func RouteLogrus(l *logrus.Logger, logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := logger.Handler()
	hooks := logrus.LevelHooks{}
	hooks.Add(&slogHook{h: h})
	l.ReplaceHooks(hooks)
	l.SetOutput(io.Discard)
	l.SetFormatter(nopFormatter{})

	ctx := context.Background()
	lvl := logrus.ErrorLevel
	for _, c := range []logrus.Level{logrus.TraceLevel, logrus.DebugLevel, logrus.InfoLevel, logrus.WarnLevel} {
		if h.Enabled(ctx, slogLevel(c)) {
			lvl = c
			break
		}
	}
	l.SetLevel(lvl)
}

// slogLevel maps a logrus level onto slog.
func slogLevel(l logrus.Level) slog.Level {
	switch l {
	case logrus.PanicLevel:
		return slog.LevelError + 8
	case logrus.FatalLevel:
		return slog.LevelError + 4
	case logrus.ErrorLevel:
		return slog.LevelError
	case logrus.WarnLevel:
		return slog.LevelWarn
	case logrus.InfoLevel:
		return slog.LevelInfo
	case logrus.DebugLevel:
		return slog.LevelDebug
	default:
		return slog.LevelDebug - 4
	}
}

// slogHook hands every logrus entry to a slog handler.
type slogHook struct{ h slog.Handler }

// Levels returns every logrus level.
func (*slogHook) Levels() []logrus.Level { return logrus.AllLevels }

// Fire converts the entry into a record. It never returns an error, because logrus
// prints hook errors to raw stderr.
func (s *slogHook) Fire(e *logrus.Entry) error {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	lvl := slogLevel(e.Level)
	if !s.h.Enabled(ctx, lvl) {
		return nil
	}
	r := slog.NewRecord(e.Time, lvl, strings.TrimSuffix(e.Message, "\n"), 0)
	for _, k := range slices.Sorted(maps.Keys(e.Data)) {
		r.AddAttrs(slog.Any(k, e.Data[k]))
	}
	_ = s.h.Handle(ctx, r)
	return nil
}

// nopFormatter formats nothing: the hook has already logged the entry.
type nopFormatter struct{}

// Format returns no bytes.
func (nopFormatter) Format(*logrus.Entry) ([]byte, error) { return nil, nil }
