package deploydtest

import (
	"testing"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// NewDocker installs a fake docker (fakedocker.Install) for tb and closes it in
// tb.Cleanup; a nil opts means the defaults (the shared build of the program, every
// command succeeds). It fails the test when the install does.
func NewDocker(tb testing.TB, opts *fakedocker.Options) *fakedocker.Docker {
	tb.Helper()
	if opts == nil {
		opts = &fakedocker.Options{}
	}
	d, err := fakedocker.Install(tb.Context(), *opts)
	if err != nil {
		tb.Fatalf("deploydtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("deploydtest: %v", err)
		}
	})
	return d
}
