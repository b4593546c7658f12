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
	b := newBox(t, boxOptions{})
	bn := faketenancy.SampleApp(b.Env, 1)
	var c strings.Builder
	c.WriteString("services:\n  web:\n    image: nginx:1.27\n    environment:\n")
	for i := range 400 {
		fmt.Fprintf(&c, "      V%03d: ${UNSET_VARIABLE_WITH_A_LONG_NAME_%03d}\n", i, i)
	}
	bn.Files["compose.yaml"] = c.String()
	b.Publish(bn)
	out, code := b.tick()
	require.Equal(t, deployd.ExitFailed, code)
	require.Equal(t, codes.UnresolvedVars, out.Code)
	rep := b.LastReport()
	assert.LessOrEqual(t, len(rep.Detail), 4<<10, "the report's detail is bounded")
	assert.True(t, utf8.ValidString(rep.Detail))
	st := b.State()
	assert.LessOrEqual(t, len(st.LastDetail), 4<<10)
	for _, f := range st.Failed {
		assert.LessOrEqual(t, len(f.Detail), 4<<10)
	}
}
