package compose

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// The tests that run docker (a fake, or a script of their own) or wait call
// t.Parallel, but those that set the process environment (t.Setenv); a test that runs
// in a few milliseconds stays serial, as it would gain nothing.

// TestMain lets the examples use this test binary as the fake docker: run through a
// link named "docker", it is the fake docker program.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "docker" {
		fakedocker.Main()
	}
	os.Exit(m.Run())
}
