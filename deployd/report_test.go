package deployd_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestReportDetailIsBounded: the report's detail (and the state's copy of it) is
// bounded like the tail, and stays valid UTF-8 where it is cut.
func TestReportDetailIsBounded(t *testing.T) {
	t.Parallel()
	b := newBox(t, boxOptions{})
	bn := faketenancy.SampleApp(b.Env, 1)
	var c strings.Builder
	c.WriteString("services:\n  web:\n    image: nginx:1.27\n    environment:\n")
	for i := range 400 {
		fmt.Fprintf(&c, "      V%03d: ${UNSET_VARIABLE_WITH_A_LONG_NAME_%03d}\n", i, i)
	}
	bn.Files["compose.yaml"] = c.String()
	b.Publish(bn)
	b.tickEnds(deployd.ExitFailed, codes.UnresolvedVars)
	rep := b.LastReport()
	assert.LessOrEqual(t, len(rep.Detail), 4<<10, "the report's detail is bounded")
	assert.True(t, utf8.ValidString(rep.Detail))
	st := b.State()
	assert.LessOrEqual(t, len(st.LastDetail), 4<<10)
	for _, f := range st.Failed {
		assert.LessOrEqual(t, len(f.Detail), 4<<10)
	}
}

// TestRevokedTokenIsTheLastFailure: once the token is revoked (and no grant is
// there), the tick's UNAUTHENTICATED is in the state with its time, for status; a
// bootstrap with a fresh grant is a run that ends 0.
func TestRevokedTokenIsTheLastFailure(t *testing.T) {
	b := idleBox(t)
	assert.Nil(t, b.State().LastFailure)

	b.Stack.Bao.InvalidateTokens(b.Env)
	b.tickEnds(deployd.ExitFailed, codes.Unauthenticated)
	st := b.State()
	require.NotNil(t, st.LastFailure)
	assert.Equal(t, codes.Unauthenticated, st.LastFailure.Code)
	assert.Equal(t, deployd.ExitFailed, st.LastFailure.Exit)
	assert.True(t, st.LastFailure.At.Equal(st.LastTick))
	assert.Equal(t, deployd.ExitFailed, st.LastExit)

	b.PlaceGrant()
	_, err := b.agent.Bootstrap(t.Context(), "")
	require.NoError(t, err)
	st = b.State()
	assert.Equal(t, deployd.ExitOK, st.LastExit, "the bootstrap is the last run")
	require.NotNil(t, st.LastFailure, "the failure before it is still told")
	assert.Equal(t, codes.Unauthenticated, st.LastFailure.Code)
	assert.True(t, st.LastTick.After(st.LastFailure.At))
}

// TestNextStepSaysWhatToDo: the steps an operator is sent to for the box's own codes.
func TestNextStepSaysWhatToDo(t *testing.T) {
	for code, want := range map[codes.Code]string{
		codes.Unauthenticated:   "monky-deployd bootstrap",
		codes.DiskLow:           "free space",
		codes.DiskFull:          "free space",
		codes.DockerUnavailable: "start docker",
		codes.AgentEnvMismatch:  "env_id",
		codes.ConfigInvalid:     "fix the config",
		codes.StateUnavailable:  "state_dir",
		codes.ComposeMissing:    "compose v2",
	} {
		assert.Contains(t, deployd.NextStep(code), want, code)
	}
	assert.Contains(t, deployd.NextStep(codes.AgentEnvMismatch), "monky-deployd bootstrap")
}
