// Package secrettest provides a secret.Registry for tests: Recorder records what a
// decoder or a client registered, so that a test can check that every secret it read
// was registered the moment it existed, and that nothing else was.
package secrettest

import (
	"slices"
	"sync"

	"github.com/monky/monky-deployd/deployd/secret"
)

// Recorder is a secret.Registry that records every value it is given, in order;
// empty values are ignored, as Registry says. The zero value is ready to use, and it
// is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	vals []string
}

var _ secret.Registry = (*Recorder)(nil)

// Add records v.
func (r *Recorder) Add(v string) {
	if v == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = append(r.vals, v)
}

// Has reports whether v was added.
func (r *Recorder) Has(v string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.vals, v)
}

// Values returns a copy of what was added, in order.
func (r *Recorder) Values() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.vals)
}
