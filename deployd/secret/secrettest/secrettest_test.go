package secrettest_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd/secret/secrettest"
)

// TestRecorder: what is added is had and listed in order; empty values are ignored, as
// secret.Registry says; concurrent adds are all kept.
func TestRecorder(t *testing.T) {
	var r secrettest.Recorder
	assert.Empty(t, r.Values())
	r.Add("a")
	r.Add("")
	r.Add("b")
	assert.True(t, r.Has("a"))
	assert.False(t, r.Has(""))
	assert.False(t, r.Has("c"))
	assert.Equal(t, []string{"a", "b"}, r.Values())
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { r.Add("x") })
	}
	wg.Wait()
	assert.Len(t, r.Values(), 12)
}
