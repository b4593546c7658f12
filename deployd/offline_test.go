package deployd_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// TestOfflineStatus: while check-ins do not reach tenancy, the live release keeps
// running and status says since when tenancy was not reached; the first check-in
// answered clears it and converges the box without a console action.
func TestOfflineStatus(t *testing.T) {
	t.Parallel()
	b, first := liveBox(t)
	reached := b.State().LastCheckin
	b.Stack.Tenancy.SetFaults(faketenancy.Faults{Status: map[string]int{"checkin": 503}})
	for range 2 {
		b.tickExits(deployd.ExitTemporary)
	}
	assert.Equal(t, first, b.Live(), "the live release keeps running")
	v := b.agent.Status()
	require.NotNil(t, v.Offline)
	require.NotNil(t, v.Offline.LastReached)
	assert.True(t, reached.Equal(*v.Offline.LastReached))
	assert.False(t, v.Offline.FailingSince.Before(reached))
	assert.Contains(t, v.Headline, "tenancy not reached since "+reached.UTC().Format("2006-01-02T15:04:05Z"))
	assert.Contains(t, v.Text(), "tenancy:")
	first2 := b.State().Unreached
	_, _ = b.tick()
	assert.True(t, first2.Equal(b.State().Unreached), "the row's first failure stays")

	b.Stack.Tenancy.SetFaults(faketenancy.Faults{})
	second := b.Publish(faketenancy.SampleApp(b.Env, 2))
	b.tickExits(deployd.ExitOK)
	assert.Equal(t, second, b.Live(), "the first tick back online converges")
	v = b.agent.Status()
	assert.Nil(t, v.Offline)
	assert.False(t, strings.Contains(v.Headline, "not reached"))
}
