package compose

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTailBuffer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		limit       int
		writes      []string
		want        string
		wantDropped int64
	}{
		{name: "nothing", limit: 4, want: ""},
		{name: "under the limit", limit: 8, writes: []string{"ab", "cd"}, want: "abcd"},
		{name: "exactly the limit", limit: 4, writes: []string{"ab", "cd"}, want: "abcd"},
		{name: "one big write", limit: 4, writes: []string{"abcdefgh"}, want: "efgh", wantDropped: 4},
		{name: "many small writes", limit: 4, writes: []string{"ab", "cd", "ef", "gh", "ij"}, want: "ghij", wantDropped: 6},
		{name: "big after small", limit: 4, writes: []string{"ab", "cdefgh"}, want: "efgh", wantDropped: 4},
		{name: "small after big", limit: 4, writes: []string{"abcdef", "g"}, want: "defg", wantDropped: 3},
		{name: "limit one", limit: 1, writes: []string{"a", "b", "c"}, want: "c", wantDropped: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTailBuffer(tc.limit)
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			got, dropped := b.snapshot()
			assert.Equal(t, tc.want, string(got))
			assert.Equal(t, tc.wantDropped, dropped)
		})
	}
}

// TestTailBufferBounded: a chatty writer never grows the buffer past 2×limit, and
// the tail is always the last bytes written.
func TestTailBufferBounded(t *testing.T) {
	const limit = 1000
	b := newTailBuffer(limit)
	var all bytes.Buffer
	for i := range 5000 {
		line := strings.Repeat(string(rune('a'+i%26)), i%37) + "\n"
		all.WriteString(line)
		_, _ = b.Write([]byte(line))
		require.LessOrEqual(t, len(b.buf), 2*limit)
	}
	got, dropped := b.snapshot()
	assert.Equal(t, all.Bytes()[all.Len()-limit:], got)
	assert.Equal(t, int64(all.Len()-limit), dropped)
	assert.LessOrEqual(t, cap(b.buf), 4*limit, "append growth stays bounded")
}

func TestCapBuffer(t *testing.T) {
	c := &capBuffer{max: 4}
	_, err := c.Write([]byte("abc"))
	require.NoError(t, err)
	_, err = c.Write([]byte("de"))
	require.ErrorIs(t, err, errTooMuchOutput)
	assert.True(t, c.overflow)
	assert.Equal(t, "abc", string(c.buf))
}

// TestLineLog: docker's output reaches the log one line at a time, whatever the
// chunks it comes in; \r (a progress redraw) ends a line too; blank lines are
// skipped, long lines cut, and past maxLoggedLines lines are only counted.
func TestLineLog(t *testing.T) {
	for _, c := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"whole lines", []string{"Pulling web\n", "web Pulled\n"}, []string{"Pulling web", "web Pulled"}},
		{"split mid-line", []string{"Con", "tainer web  Start", "ed\nlast"}, []string{"Container web  Started", "last"}},
		{"carriage returns", []string{"a 1%\ra 50%\ra 100%\r\n"}, []string{"a 1%", "a 50%", "a 100%"}},
		{"blank lines", []string{"\n\n  \nx\n"}, []string{"x"}},
		{"a long line is cut", []string{strings.Repeat("é", 400) + "\n"}, []string{strings.Repeat("é", 256)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := newLineLog(slog.New(slog.NewJSONHandler(&buf, nil)), "docker compose up")
			for _, ch := range c.chunks {
				n, err := l.Write([]byte(ch))
				require.NoError(t, err)
				assert.Equal(t, len(ch), n)
			}
			l.flush()
			assert.Equal(t, c.want, outputs(t, &buf))
		})
	}
	t.Run("capped", func(t *testing.T) {
		var buf bytes.Buffer
		l := newLineLog(slog.New(slog.NewJSONHandler(&buf, nil)), "docker compose up")
		_, _ = l.Write([]byte(strings.Repeat("line\n", maxLoggedLines+7)))
		l.flush()
		assert.Len(t, outputs(t, &buf), maxLoggedLines)
		assert.Contains(t, buf.String(), `"lines_not_logged":7`)
	})
}

func outputs(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if s, ok := rec["output"].(string); ok {
			assert.Equal(t, "docker compose up", rec["msg"])
			got = append(got, s)
		}
	}
	return got
}
