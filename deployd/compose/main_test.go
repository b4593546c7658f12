package compose

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

// TestMain lets the examples use this test binary as the fake docker: run through a
// link named "docker", it is the fake docker program.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "docker" {
		os.Exit(fakedocker.Main(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
