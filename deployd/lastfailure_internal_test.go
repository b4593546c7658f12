package deployd

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// TestEndTickRecordsTheLastFailure: a run that ends non-zero is recorded with its time,
// exit code and code: a temporary one's own, AGENT_ENV_MISMATCH for 78, or the code
// the failing step noted; a later success keeps it, and the note does not outlive the
// run.
func TestEndTickRecordsTheLastFailure(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var st State
	endTick(&st, t0, ExitOK, "", 0)
	assert.Nil(t, st.LastFailure, "no failure yet")

	endTick(&st, t0.Add(time.Minute), ExitTemporary, codes.Unavailable, 0)
	assert.Equal(t, &RunFailure{At: t0.Add(time.Minute), Exit: ExitTemporary, Code: codes.Unavailable}, st.LastFailure)

	endTick(&st, t0.Add(2*time.Minute), ExitEnvMismatch, "", 0)
	assert.Equal(t, &RunFailure{At: t0.Add(2 * time.Minute), Exit: ExitEnvMismatch, Code: codes.AgentEnvMismatch}, st.LastFailure)

	noteFailure(&st, &Error{Op: "token lookup", Code: codes.Unauthenticated, Err: errors.New("permission denied")})
	endTick(&st, t0.Add(3*time.Minute), ExitFailed, "", 0)
	assert.Equal(t, &RunFailure{At: t0.Add(3 * time.Minute), Exit: ExitFailed, Code: codes.Unauthenticated}, st.LastFailure)

	endTick(&st, t0.Add(4*time.Minute), ExitOK, "", 0)
	assert.Equal(t, t0.Add(3*time.Minute), st.LastFailure.At, "a success keeps the last failure")
	assert.Equal(t, ExitOK, st.LastExit)

	// The note is the ending run's: a later failure of a step that notes nothing has
	// no code rather than an old one.
	noteFailure(&st, &Error{Op: "token lookup", Code: codes.Unauthenticated})
	endTick(&st, t0.Add(5*time.Minute), ExitOK, "", 0)
	endTick(&st, t0.Add(6*time.Minute), ExitFailed, "", 0)
	assert.Equal(t, &RunFailure{At: t0.Add(6 * time.Minute), Exit: ExitFailed}, st.LastFailure)

	// endRun, which knows the code, records it as given.
	endRun(&st, t0.Add(7*time.Minute), ExitFailed, codes.LeaseShape, "", 0)
	assert.Equal(t, &RunFailure{At: t0.Add(7 * time.Minute), Exit: ExitFailed, Code: codes.LeaseShape}, st.LastFailure)

	data, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"last_failure":{"at":"2026-12-01T12:07:00Z","exit":1,"code":"LEASE_SHAPE"}`)
	var back State
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, st.LastFailure, back.LastFailure)
}
