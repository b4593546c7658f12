package packaging_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd"
)

const holdPathUnit = "packaging/systemd/monky-deployd-hold.path"

// TestHoldPathUnit: under the timer, a hold set or cleared starts a tick at once (the
// hold file the agent reads by default); the path unit comes and goes with the timer,
// so that it never starts the one-shot service beside the loop service; both services
// may write the hold directory (the agent's note of what waits).
func TestHoldPathUnit(t *testing.T) {
	dir := deployd.DefaultConfig().Holds.Dir
	u := readUnit(t, holdPathUnit)
	assert.Equal(t, filepath.Join(dir, "hold.json"), u.one(t, "Path", "PathChanged"))
	assert.Equal(t, "monky-deployd.service", u.one(t, "Path", "Unit"))
	assert.Equal(t, "monky-deployd.timer", u.one(t, "Unit", "PartOf"))
	assert.Equal(t, "monky-deployd.timer", u.one(t, "Install", "WantedBy"))
	assert.Equal(t, "monky-deployd-hold.path", readUnit(t, timerUnit).one(t, "Install", "Also"))
	assert.Contains(t, strings.Fields(readUnit(t, loopUnit).one(t, "Unit", "Conflicts")), "monky-deployd.timer",
		"the loop stops the timer, and with it the path unit")
	for _, svc := range []string{serviceUnit, loopUnit} {
		assert.Contains(t, strings.Fields(readUnit(t, svc).one(t, "Service", "ReadWritePaths")), "-"+dir, svc)
	}
}
