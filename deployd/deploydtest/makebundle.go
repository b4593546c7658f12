package deploydtest

import (
	"testing"

	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// MakeBundle builds a bundle with faketenancy.BuildBundle and fails the test if spec
// is invalid.
func MakeBundle(tb testing.TB, spec faketenancy.BundleSpec) faketenancy.Bundle {
	tb.Helper()
	b, err := faketenancy.BuildBundle(spec)
	fatal(tb, err)
	return b
}
