package deployd_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
)

// TestNextStepCoversEveryCode: every code of the vocabulary has its own next step; a code added without one fails here.
func TestNextStepCoversEveryCode(t *testing.T) {
	all := codes.All()
	generic := deployd.NextStep("NOT_A_CODE")
	assert.Equal(t, deployd.NextStepUnknown, generic)
	assert.Contains(t, generic, "journalctl -u monky-deployd")
	for _, c := range all {
		step := deployd.NextStep(c)
		assert.NotEmpty(t, step, c)
		assert.NotEqual(t, generic, step, "%s has no next step of its own", c)
		assert.Equal(t, strings.TrimSpace(step), step, c)
		assert.NotContains(t, step, "\n", c)
	}
	assert.Empty(t, deployd.NextStep(""), "no code, nothing to do")
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
