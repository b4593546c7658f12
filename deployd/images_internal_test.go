package deployd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKeepPending: the records of gone releases keep only the images still pending
// (in use elsewhere, or a removal that failed); a record with none is dropped, so the
// records never outgrow the images waiting to be removed. Kept releases' records are
// untouched.
func TestKeepPending(t *testing.T) {
	st := &State{Images: map[string][]string{
		"gone-a": {"sha256:1", "sha256:2"},
		"gone-b": {"sha256:3"},
		"kept":   {"sha256:2", "sha256:4"},
	}}
	tk := &tick{st: st}
	gone := func(sha string) bool { return sha != "kept" }
	tk.keepPending(gone, map[string]bool{"sha256:2": true, "sha256:4": true})
	assert.Equal(t, map[string][]string{
		"gone-a": {"sha256:2"},
		"kept":   {"sha256:2", "sha256:4"},
	}, st.Images)
	tk.keepPending(gone, map[string]bool{})
	assert.Equal(t, map[string][]string{"kept": {"sha256:2", "sha256:4"}}, st.Images)
}
