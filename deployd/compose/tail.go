package compose

import (
	"errors"
	"sync"
)

// tailBuffer keeps the last limit bytes written to it. Its memory stays under
// 2×limit whatever the amount written.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte // at most 2×limit bytes; the tail is its last limit bytes
	total int64  // bytes written
}

func newTailBuffer(limit int) *tailBuffer {
	return &tailBuffer{limit: limit}
}

// Write keeps the tail of p; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	t.total += int64(n)
	switch {
	case n >= t.limit:
		t.buf = append(t.buf[:0], p[n-t.limit:]...)
		return n, nil
	case len(t.buf)+n > 2*t.limit:
		keep := t.buf[len(t.buf)-t.limit:]
		t.buf = t.buf[:copy(t.buf, keep)]
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// snapshot returns a copy of the kept tail and the number of bytes dropped before it.
func (t *tailBuffer) snapshot() ([]byte, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.limit {
		b = b[len(b)-t.limit:]
	}
	return append([]byte(nil), b...), t.total - int64(len(b))
}

// errTooMuchOutput is stdout of ps passing its cap.
var errTooMuchOutput = errors.New("output larger than the cap")

// capBuffer keeps everything up to max bytes and then refuses more.
type capBuffer struct {
	max      int
	buf      []byte
	overflow bool
}

// Write appends p, or refuses all of it once the cap would be passed.
func (c *capBuffer) Write(p []byte) (int, error) {
	if len(c.buf)+len(p) > c.max {
		c.overflow = true
		return 0, errTooMuchOutput
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}
