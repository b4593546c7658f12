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
			l := newLineLog(slog.New(slog.NewJSONHandler(&buf, nil)), "up")
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
		l := newLineLog(slog.New(slog.NewJSONHandler(&buf, nil)), "up")
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
