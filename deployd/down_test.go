package deployd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestDownReportNamesTheReleaseTakenDown: the report of a down carries the sha and
// serial of the release it took down (tenancy.Report's doc), and "" and 0 when nothing
// was live.
func TestDownReportNamesTheReleaseTakenDown(t *testing.T) {
	b := newBox(t, boxOptions{})
	sha := b.Publish(faketenancy.SampleApp(b.Env, 3))
	_, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	require.Equal(t, sha, b.Live())

	b.SetDesired(faketenancy.Desired{Action: "down"})
	out, code := b.tick()
	require.Equal(t, deployd.ExitOK, code)
	rep := b.LastReport()
	assert.Equal(t, "down", rep.Result)
	assert.Equal(t, sha, rep.SHA)
	assert.Equal(t, int64(3), rep.Serial)
	assert.Equal(t, sha, out.SHA)
	assert.Equal(t, int64(3), out.Serial)

	// Down again: nothing is live, the report names no release.
	out, code = b.tick()
	require.Equal(t, deployd.ExitOK, code)
	rep = b.LastReport()
	assert.Equal(t, "down", rep.Result)
	assert.Equal(t, "", rep.SHA)
	assert.Zero(t, rep.Serial)
	assert.Equal(t, "", out.SHA)
}
