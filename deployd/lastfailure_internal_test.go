package deployd

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
)

// TestEndRunRecordsTheLastFailure: a run that ends non-zero is recorded with its time,
// exit code and code; a later success keeps it.
func TestEndRunRecordsTheLastFailure(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var st State
	endRun(&st, t0, ExitOK, "", "", 0)
	assert.Nil(t, st.LastFailure, "no failure yet")

	endRun(&st, t0.Add(time.Minute), ExitTemporary, codes.Unavailable, codes.Unavailable, 3*time.Second)
	assert.Equal(t, &RunFailure{At: t0.Add(time.Minute), Exit: ExitTemporary, Code: codes.Unavailable}, st.LastFailure)
	assert.Equal(t, codes.Unavailable, st.LastTemporary)
	assert.Equal(t, 3*time.Second, st.RetryAfter)

	endRun(&st, t0.Add(2*time.Minute), ExitEnvMismatch, codes.AgentEnvMismatch, "", 0)
	assert.Equal(t, &RunFailure{At: t0.Add(2 * time.Minute), Exit: ExitEnvMismatch, Code: codes.AgentEnvMismatch}, st.LastFailure)
	assert.Empty(t, st.LastTemporary)

	endRun(&st, t0.Add(4*time.Minute), ExitOK, "", "", 0)
	assert.Equal(t, t0.Add(2*time.Minute), st.LastFailure.At, "a success keeps the last failure")
	assert.Equal(t, ExitOK, st.LastExit)

	endRun(&st, t0.Add(7*time.Minute), ExitFailed, codes.LeaseShape, "", 0)
	assert.Equal(t, &RunFailure{At: t0.Add(7 * time.Minute), Exit: ExitFailed, Code: codes.LeaseShape}, st.LastFailure)

	data, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"last_failure":{"at":"2026-12-01T12:07:00Z","exit":1,"code":"LEASE_SHAPE"}`)
	var back State
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, st.LastFailure, back.LastFailure)
}
