package hold_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/hold"
)

var t0 = time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC)

func sample() hold.Hold {
	return hold.Hold{Owner: "alice", UID: os.Getuid(), Reason: "demo at 3", SetAt: t0, Until: t0.Add(2 * time.Hour)}
}

func TestParse(t *testing.T) {
	good := `{"owner":"alice","uid":1000,"reason":"demo at 3","set_at":"2026-12-04T13:00:00Z","until":"2026-12-04T15:00:00Z"}`
	tests := []struct {
		name string
		in   string
		want string // "" accepts; otherwise a part of the error
	}{
		{"a hold", good, ""},
		{"an empty reason", strings.Replace(good, "demo at 3", "", 1), ""},
		{"garbage", "\x00\x01garbage", "not a JSON object"},
		{"empty", "", "not a JSON object"},
		{"a list", "[]", "not a JSON object"},
		{"an unknown field", strings.Replace(good, `"uid"`, `"extra":1,"uid"`, 1), "not a JSON object"},
		{"two values", good + good, "more than one JSON value"},
		{"no owner", strings.Replace(good, `"owner":"alice",`, "", 1), "field owner"},
		{"an owner with a newline", strings.Replace(good, "alice", `al\nice`, 1), "field owner"},
		{"a long owner", strings.Replace(good, "alice", strings.Repeat("a", hold.MaxOwner+1), 1), "field owner"},
		{"no uid", strings.Replace(good, `"uid":1000,`, "", 1), "field uid"},
		{"a negative uid", strings.Replace(good, `1000`, `-1`, 1), "field uid"},
		{"a uid as a string", strings.Replace(good, `1000`, `"1000"`, 1), "not a JSON object"},
		{"no reason", strings.Replace(good, `"reason":"demo at 3",`, "", 1), "field reason"},
		{"a long reason", strings.Replace(good, "demo at 3", strings.Repeat("x", hold.MaxReason+1), 1), "field reason"},
		{"an escape in the reason", strings.Replace(good, "demo at 3", `\u001b[31m`, 1), "field reason"},
		{"no until", strings.Replace(good, `,"until":"2026-12-04T15:00:00Z"`, "", 1), "field until is required"},
		{"until not a time", strings.Replace(good, "2026-12-04T15:00:00Z", "in two hours", 1), "field until must be an RFC 3339"},
		{"until before set_at", strings.Replace(good, "2026-12-04T15:00:00Z", "2026-12-04T12:00:00Z", 1), "after set_at"},
		{"a year far ahead", strings.Replace(good, "2026-12-04T15", "0001-12-04T15", 1), "RFC 3339"},
		{"too large", good + strings.Repeat(" ", hold.MaxSize), "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := hold.Parse([]byte(tt.in))
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, "alice", h.Owner)
				assert.Equal(t, 1000, h.UID)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "alice", "an error never echoes a value")
		})
	}
}

func TestEndIsCutToMax(t *testing.T) {
	h := sample()
	tests := []struct {
		name string
		max  time.Duration
		want time.Time
		cut  bool
	}{
		{"within max", 8 * time.Hour, t0.Add(2 * time.Hour), false},
		{"longer than max", time.Hour, t0.Add(time.Hour), true},
		{"exactly max", 2 * time.Hour, t0.Add(2 * time.Hour), false},
		{"no max", 0, t0.Add(2 * time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, h.End(tt.max))
			assert.Equal(t, tt.cut, h.Cut(tt.max))
			assert.True(t, h.Active(tt.want.Add(-time.Second), tt.max))
			assert.False(t, h.Active(tt.want, tt.max), "a hold ends by itself")
		})
	}
}

// TestWriteReadClear: a hold written reads back, a clear removes it; the stamp of the
// hold file sees both.
func TestWriteReadClear(t *testing.T) {
	dir := t.TempDir()
	_, err := hold.Read(dir)
	assert.ErrorIs(t, err, hold.ErrNone)
	none := hold.StampOf(dir)
	require.NoError(t, hold.Write(dir, sample()))
	set := hold.StampOf(dir)
	assert.NotEqual(t, none, set)
	assert.Equal(t, set, hold.StampOf(dir))
	fi, err := os.Stat(hold.Path(dir))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	got, err := hold.Read(dir)
	require.NoError(t, err)
	assert.Equal(t, sample().Reason, got.Reason)
	assert.True(t, got.Until.Equal(sample().Until))
	require.NoError(t, hold.Clear(dir))
	assert.Equal(t, none, hold.StampOf(dir))
	require.NoError(t, hold.Clear(dir), "clearing no hold is no error")
	_, err = hold.Read(dir)
	assert.ErrorIs(t, err, hold.ErrNone)
}

// TestReadRefusesHostileFiles: what a hold file must not be is refused with a
// message that says why, and never read as a hold.
func TestReadRefusesHostileFiles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, p string)
		want  string
	}{
		{"a symlink to /etc/shadow", func(t *testing.T, p string) {
			require.NoError(t, os.Symlink("/etc/shadow", p))
		}, "symlink"},
		{"a symlink to a good hold", func(t *testing.T, p string) {
			other := filepath.Join(t.TempDir(), "h.json")
			require.NoError(t, os.WriteFile(other, hold.Marshal(sample()), 0o600))
			require.NoError(t, os.Symlink(other, p))
		}, "symlink"},
		{"64 MiB", func(t *testing.T, p string) {
			f, err := os.Create(p)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(64<<20))
			require.NoError(t, f.Close())
		}, "larger than"},
		{"garbage", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte("\x7fELF\x02\x01garbage"), 0o640))
		}, "malformed"},
		{"another owner's", func(t *testing.T, p string) {
			h := sample()
			h.UID = os.Getuid() + 1
			require.NoError(t, os.WriteFile(p, hold.Marshal(h), 0o640))
		}, "written by uid"},
		{"writable by others", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, hold.Marshal(sample()), 0o640))
			require.NoError(t, os.Chmod(p, 0o666))
		}, "others may write"},
		{"a hard link", func(t *testing.T, p string) {
			other := filepath.Join(filepath.Dir(p), "other")
			require.NoError(t, os.WriteFile(other, hold.Marshal(sample()), 0o640))
			require.NoError(t, os.Link(other, p))
		}, "hard link"},
		{"a directory", func(t *testing.T, p string) {
			require.NoError(t, os.Mkdir(p, 0o750))
		}, "directory"},
		{"a fifo", func(t *testing.T, p string) {
			require.NoError(t, syscall.Mkfifo(p, 0o640))
		}, "fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, hold.Path(dir))
			done := make(chan error, 1)
			go func() { _, err := hold.Read(dir); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Read hangs")
			}
			var refused *hold.RefusedError
			require.True(t, errors.As(err, &refused), "want a refusal, got %v", err)
			assert.Contains(t, refused.Why, tt.want)
			assert.Equal(t, hold.Path(dir), refused.Path)
			assert.NotContains(t, err.Error(), "root:", "never the content of what it points to")
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(string(hold.Marshal(sample())))
	f.Add(`{"owner":"a","uid":0,"reason":"","set_at":"2026-01-01T00:00:00Z","until":"2026-01-01T00:00:01Z"}`)
	f.Add(`{}`)
	f.Add(`null`)
	f.Add(`{"owner":"a","uid":0,"reason":"","set_at":"2026-01-01T00:00:00.5Z","until":"2026-01-01T00:00:00.9Z"}`)
	f.Fuzz(func(t *testing.T, in string) {
		h, err := hold.Parse([]byte(in))
		if err != nil {
			assert.NotEmpty(t, err.Error())
			return
		}
		// What parses is a hold Write stores and Parse reads back the same.
		assert.True(t, h.Until.After(h.SetAt))
		assert.LessOrEqual(t, len(h.Reason), hold.MaxReason)
		back, err := hold.Parse(hold.Marshal(h))
		require.NoError(t, err)
		assert.Equal(t, h.Owner, back.Owner)
		assert.Equal(t, h.Reason, back.Reason)
		assert.True(t, h.Until.Equal(back.Until))
	})
}
