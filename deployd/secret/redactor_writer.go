package secret

import (
	"bytes"
	"io"
	"sync"
)

// WriterBound is how many bytes without a newline the Writer buffers before it writes
// out the part that no registered secret can still extend into.
const WriterBound = 64 << 10

// Writer returns a line-buffered writer that redacts what is written to it and passes it
// on to w. Complete lines are redacted and written as they arrive; an incomplete line is
// held back, so a secret split across two Write calls is still caught. When more than
// WriterBound bytes arrive without a newline, everything except the last few bytes (as
// many as the longest registered form, so that a secret starting there can still be
// recognised) is redacted and written. Close redacts and writes what is left; it does not
// close w. The writer is safe for concurrent use; each Write reports len(p) consumed
// unless w fails.
func (r *Redactor) Writer(w io.Writer) io.WriteCloser {
	return &lineWriter{r: r, w: w}
}

// lineWriter is the writer returned by Redactor.Writer.
type lineWriter struct {
	r   *Redactor
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

// Write buffers p and writes every complete line, redacted.
func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.buf = append(lw.buf, p...)
	if i := bytes.LastIndexByte(lw.buf, '\n'); i >= 0 {
		err := lw.emit(i + 1)
		if err != nil {
			return len(p), err
		}
	}
	c := lw.r.load()
	keep := c.maxLen + 1
	if len(lw.buf) <= max(WriterBound, 2*keep) {
		return len(p), nil
	}
	// Write all but the last keep bytes: an occurrence that starts before the cut is
	// entirely inside the buffer. If the cut falls inside a masked range, move it to the
	// range's end.
	cut := len(lw.buf) - keep
	for _, x := range c.find(string(lw.buf)) {
		if x.start < cut && cut < x.end {
			cut = x.end
		}
	}
	return len(p), lw.emit(cut)
}

// emit redacts and writes buf[:n] and drops it from the buffer.
func (lw *lineWriter) emit(n int) error {
	out := lw.r.RedactBytes(lw.buf[:n])
	_, err := lw.w.Write(out)
	rest := copy(lw.buf, lw.buf[n:])
	lw.buf = lw.buf[:rest]
	return err
}

// Close redacts and writes the buffered rest. It does not close the underlying writer.
func (lw *lineWriter) Close() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.buf) == 0 {
		return nil
	}
	return lw.emit(len(lw.buf))
}
