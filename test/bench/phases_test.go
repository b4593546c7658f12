package bench

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// phase is one part of an apply, ending at the agent's log line that starts with msg
// ("" ends it at the end of the tick).
type phase struct {
	name string
	msg  string
}

// applyPhases split an apply by the agent's own log lines (deployd/apply.go).
var applyPhases = []phase{
	{"checkin+download", "downloaded the bundle"}, // lock, state, token lookup, check-in, download
	{"verify", "bundle verified"},
	{"lease+login+secrets", "read the environment's secrets"},
	{"stage+promote", "promoted the release"},
	{"compose+health", "applied: every service"},
	{"report+prune+save", ""},
}

// mark is one log line and when it arrived.
type mark struct {
	msg string
	at  time.Time
}

// recorder is a slog.Handler that notes the time of every record at info and above,
// then passes it to next (the binary's handler), so that the agent pays what it pays
// in production.
type recorder struct {
	next  slog.Handler
	mu    *sync.Mutex
	marks *[]mark
}

var _ slog.Handler = recorder{}

func newRecorder(next slog.Handler) recorder {
	return recorder{next: next, mu: &sync.Mutex{}, marks: &[]mark{}}
}

func (r recorder) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo && r.next.Enabled(ctx, l)
}

func (r recorder) Handle(ctx context.Context, rec slog.Record) error {
	now := time.Now()
	r.mu.Lock()
	*r.marks = append(*r.marks, mark{rec.Message, now})
	r.mu.Unlock()
	return r.next.Handle(ctx, rec)
}

func (r recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return recorder{next: r.next.WithAttrs(as), mu: r.mu, marks: r.marks}
}

func (r recorder) WithGroup(name string) slog.Handler {
	return recorder{next: r.next.WithGroup(name), mu: r.mu, marks: r.marks}
}

// take returns the marks so far and forgets them.
func (r recorder) take() []mark {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := *r.marks
	*r.marks = nil
	return m
}

// split divides the time from start to end into phases by the first mark of each
// phase's message, in order. A phase whose line is missing or out of order is an
// error: the agent's log changed and applyPhases must follow it.
func split(phases []phase, marks []mark, start, end time.Time) ([]time.Duration, error) {
	out := make([]time.Duration, len(phases))
	prev, i := start, 0
	for k, p := range phases {
		at := end
		if p.msg != "" {
			for ; i < len(marks) && !strings.HasPrefix(marks[i].msg, p.msg); i++ {
			}
			if i == len(marks) {
				return nil, fmt.Errorf("no log line %q after the phase before %s (was the agent's log reworded?)", p.msg, p.name)
			}
			at = marks[i].at
		}
		if at.Before(prev) {
			return nil, fmt.Errorf("phase %s ends before it starts", p.name)
		}
		out[k] = at.Sub(prev)
		prev = at
	}
	return out, nil
}
