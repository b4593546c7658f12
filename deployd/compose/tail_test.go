package compose

import (
	"bytes"
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
