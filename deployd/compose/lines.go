package compose

import (
	"bytes"
	"log/slog"
	"sync"
	"unicode/utf8"
)

// maxLoggedLines bounds how many lines of one command's output go to the log; the
// rest is counted, and the report's tail keeps the end.
const maxLoggedLines = 500

// maxLineLen bounds one logged line.
const maxLineLen = 512

// lineLog writes docker's output to the log line by line as it comes, so that an
// operator sees what a long compose up (image pulls) is doing. Lines pass through
// the logger's handler, and so through the agent's redactor.
type lineLog struct {
	mu      sync.Mutex
	log     *slog.Logger
	partial []byte
	lines   int
	// prefix is the command the lines are of ("docker compose up", "docker pull").
	prefix string
}

func newLineLog(log *slog.Logger, prefix string) *lineLog {
	return &lineLog{log: log, prefix: prefix}
}

// Write logs every complete line of p (\n or \r ends one); it never fails.
func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			l.partial = append(l.partial, p...)
			if len(l.partial) > maxLineLen {
				l.emit(l.partial)
				l.partial = l.partial[:0]
			}
			break
		}
		l.emit(append(l.partial, p[:i]...))
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// flush logs what is left without a line end, and how many lines were not logged.
func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.emit(l.partial)
	l.partial = nil
	if skipped := l.lines - maxLoggedLines; skipped > 0 {
		l.log.Info(l.prefix+": more output was not logged; the report's tail keeps its end", "lines_not_logged", skipped)
	}
}

func (l *lineLog) emit(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	l.lines++
	if l.lines > maxLoggedLines {
		return
	}
	if len(line) > maxLineLen {
		line = line[:maxLineLen]
		for len(line) > 0 && !utf8.Valid(line) {
			line = line[:len(line)-1]
		}
	}
	l.log.Info(l.prefix, "output", string(line))
}
