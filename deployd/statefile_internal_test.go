package deployd

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
)

// TestSaveRead: what Save writes, Read gives back, with the schema and env set, mode
// 0600 and through the redactor; a missing file is an empty state, a broken one
// ErrStateCorrupt.
func TestSaveRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.json")
	st, err := readStateFile(p, "env-dev-01")
	require.NoError(t, err)
	assert.Equal(t, State{Schema: stateSchema, EnvID: "env-dev-01"}, st)

	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	setServing(&st, release.Live{SHA: strings.Repeat("a", 64), Serial: 3, Confirmed: true})
	endRun(&st, at.Add(-time.Second), at, "", &tenancy.APIError{Op: "checkin", Kind: tenancy.ErrUnavailable, RetryAfter: 7 * time.Second}, redactNothing)
	st.LastDetail = "the secret hunter2 leaked"
	require.NoError(t, saveStateFile(p, p+".keep", "env-dev-01", &st, func(b []byte) []byte {
		return []byte(strings.ReplaceAll(string(b), "hunter2", "[REDACTED]"))
	}))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	back, err := readStateFile(p, "env-dev-01")
	require.NoError(t, err)
	assert.Equal(t, st.LiveSHA, back.LiveSHA)
	assert.Equal(t, int64(3), back.LiveSerial)
	assert.True(t, back.Confirmed)
	require.NotNil(t, back.Condition)
	assert.Equal(t, codes.Unavailable, back.Condition.Code)
	assert.True(t, at.Add(6*time.Second).Equal(back.Condition.NextAttempt), "Retry-After counts from the run's start")
	assert.Equal(t, 75, back.LastExit)
	assert.True(t, at.Equal(back.LastTick))
	assert.Equal(t, "the secret [REDACTED] leaked", back.LastDetail)

	require.NoError(t, os.WriteFile(p, []byte("{"), 0o600))
	_, err = readStateFile(p, "env-dev-01")
	assert.True(t, errors.Is(err, ErrStateCorrupt), "%v", err)
}

// TestSetServingForgetsTheReplacedRelease: what was known of the live release is not
// true of another one.
func TestSetServingForgetsTheReplacedRelease(t *testing.T) {
	st := State{LiveSHA: "a", LiveServices: []string{"web"}, LiveOneShots: []string{}, Live: &LiveHealth{SHA: "a"}}
	setServing(&st, release.Live{SHA: "a", Confirmed: true})
	assert.NotNil(t, st.Live, "the same release keeps it")
	setServing(&st, release.Live{SHA: "b"})
	assert.Nil(t, st.Live)
	assert.Nil(t, st.LiveServices)
	assert.Nil(t, st.LiveOneShots)
}

// TestReadToken: the token file trimmed of line ends and blanks around it; none is "".
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	tok, err := readTokenFile(filepath.Join(dir, "none"))
	require.NoError(t, err)
	assert.Empty(t, tok)
	p := filepath.Join(dir, "bao.token")
	require.NoError(t, os.WriteFile(p, []byte(" \ts.abc def\r\n\n"), 0o600))
	tok, err = readTokenFile(p)
	require.NoError(t, err)
	assert.Equal(t, "s.abc def", tok)
}

// TestDockerVersionFresh: the docker version is reused for an hour, and not from a
// time in the future.
func TestDockerVersionFresh(t *testing.T) {
	now := time.Now()
	for at, want := range map[time.Duration]bool{-time.Minute: true, -59 * time.Minute: true, -time.Hour: false, time.Minute: false} {
		st := State{DockerVersion: "27.3.1", DockerVersionAt: now.Add(at)}
		assert.Equal(t, want, dockerVersionFresh(&st, now), at)
	}
	assert.False(t, dockerVersionFresh(&State{}, now))
}

// TestEndRunRecordsTheLastFailure: a run that ends non-zero is recorded with its time,
// exit code and code; a later success keeps it.
func TestEndRunRecordsTheLastFailure(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var st State
	endRun(&st, t0, t0, "", nil, redactNothing)
	assert.Nil(t, st.LastFailure, "no failure yet")

	endRun(&st, t0, t0.Add(time.Minute), "", &Error{Op: "checkin", Code: codes.Unavailable}, redactNothing)
	assert.Equal(t, &RunFailure{At: t0.Add(time.Minute), Exit: ExitTemporary, Code: codes.Unavailable}, st.LastFailure)

	endRun(&st, t0, t0.Add(2*time.Minute), "", &Error{Op: "checkin", Code: codes.AgentEnvMismatch}, redactNothing)
	assert.Equal(t, &RunFailure{At: t0.Add(2 * time.Minute), Exit: ExitEnvMismatch, Code: codes.AgentEnvMismatch}, st.LastFailure)

	endRun(&st, t0, t0.Add(4*time.Minute), "", nil, redactNothing)
	assert.Equal(t, t0.Add(2*time.Minute), st.LastFailure.At, "a success keeps the last failure")
	assert.Equal(t, ExitOK, st.LastExit)

	endRun(&st, t0, t0.Add(7*time.Minute), "", &Error{Op: "lease", Code: codes.LeaseShape}, redactNothing)
	assert.Equal(t, &RunFailure{At: t0.Add(7 * time.Minute), Exit: ExitFailed, Code: codes.LeaseShape}, st.LastFailure)

	data, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"last_failure":{"at":"2026-12-01T12:07:00Z","exit":1,"code":"LEASE_SHAPE"}`)
	var back State
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, st.LastFailure, back.LastFailure)
}

// TestEndRunKeepsTheCondition: consecutive runs that do not end 0 are one condition,
// with the time its streak and its code began, the latest run and a count; a run that
// ends 0 ends it.
func TestEndRunKeepsTheCondition(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sha := strings.Repeat("b", 64)
	var st State
	unavailable := &Error{Op: "checkin", Err: &tenancy.APIError{Op: "checkin", Kind: tenancy.ErrUnavailable}}
	for i := range 3 {
		endRun(&st, t0.Add(time.Duration(i)*time.Minute), t0.Add(time.Duration(i)*time.Minute+time.Second), "", unavailable, redactNothing)
	}
	c := st.Condition
	require.NotNil(t, c)
	assert.Equal(t, codes.Unavailable, c.Code)
	assert.Equal(t, ExitTemporary, c.Exit)
	assert.Equal(t, 3, c.Runs)
	assert.True(t, c.Since.Equal(t0.Add(time.Second)))
	assert.True(t, c.CodeSince.Equal(c.Since))
	assert.True(t, c.Last.Equal(t0.Add(2*time.Minute+time.Second)))
	assert.True(t, c.Temporary())
	assert.Zero(t, c.NextAttempt, "no Retry-After: the next tick")

	// Another code: the streak goes on, its code's time starts again.
	rememberFailure(&st, sha, Failure{Code: codes.SecretMissing, At: t0, Until: t0.Add(time.Hour)})
	endRun(&st, t0.Add(5*time.Minute), t0.Add(5*time.Minute), sha, &Error{Op: "read secrets", Code: codes.SecretMissing, Err: errors.New("db: missing")}, redactNothing)
	assert.Equal(t, codes.SecretMissing, c.Code)
	assert.Equal(t, ExitFailed, c.Exit)
	assert.Equal(t, 4, c.Runs)
	assert.True(t, c.Since.Equal(t0.Add(time.Second)), "the streak began with the first run")
	assert.True(t, c.CodeSince.Equal(t0.Add(5*time.Minute)))
	assert.Equal(t, sha, c.SHA)
	assert.True(t, c.NextAttempt.Equal(t0.Add(time.Hour)), "a held sha is tried again when its hold ends")
	assert.False(t, c.Waiting(t0.Add(6*time.Minute)), "only a temporary condition waits before the download")
	assert.Contains(t, c.Detail, "db: missing")

	endRun(&st, t0.Add(6*time.Minute), t0.Add(6*time.Minute), "", nil, redactNothing)
	assert.Nil(t, st.Condition, "a run that ended 0 ends the condition")
}

// redactNothing is a redactor for tests that plant no secret.
func redactNothing(s string) string { return s }

// TestReadTokenFileCorrupt: what a crash or a disk can leave in bao.token is known as
// corrupt when read (never sent as a bearer), with why and the path, and never with
// what the file holds.
func TestReadTokenFileCorrupt(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		data []byte
		why  string
	}{
		"nul":       {make([]byte, 96), "not printable ASCII"},
		"inner nul": {[]byte("hvs.CAESIJ\x00\x00\x00\n"), "not printable ASCII"},
		"binary":    {[]byte("hvs.abc\xff\xfedef"), "not printable ASCII"},
		"tab":       {[]byte("hvs.abc\tdef"), "not printable ASCII"},
		"empty":     {nil, "empty"},
		"blank":     {[]byte(" \r\n\t\n"), "empty"},
		"too long":  {[]byte(strings.Repeat("a", maxTokenFile+1)), "larger than 4096 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			require.NoError(t, os.WriteFile(p, tc.data, 0o600))
			tok, err := readTokenFile(p)
			require.Error(t, err)
			assert.Empty(t, tok)
			assert.ErrorIs(t, err, ErrTokenCorrupt)
			assert.Equal(t, "the OpenBao token file "+p+" is corrupt ("+tc.why+")", err.Error())
		})
	}
	t.Run("longest", func(t *testing.T) {
		p := filepath.Join(dir, "longest")
		long := "hvb." + strings.Repeat("A", maxTokenFile-5)
		require.NoError(t, os.WriteFile(p, []byte(long+"\n"), 0o600))
		tok, err := readTokenFile(p)
		require.NoError(t, err)
		assert.Equal(t, long, tok)
	})
}

// TestReadTokenFileNotRegular: a token path that is a fifo or a directory is an error
// naming it, at once; it is not a corrupt token (nothing to bootstrap over).
func TestReadTokenFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "bao.token")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err := readTokenFile(fifo)
	require.Error(t, err)
	assert.ErrorIs(t, err, fsutil.ErrNotRegular)
	assert.False(t, errors.Is(err, ErrTokenCorrupt))
	assert.Contains(t, err.Error(), fifo+" is a fifo, not a regular file")
}
