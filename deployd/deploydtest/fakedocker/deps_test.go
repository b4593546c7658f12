package fakedocker_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestLinksNoTesting: the package links neither "testing" nor httptest, nor the agent
// it stands beside.
func TestLinksNoTesting(t *testing.T) {
	deps := testprog.Deps(t, ".")
	if len(deps) < 2 || !slices.Contains(deps, "github.com/monky/monky-deployd/deployd/deploydtest/fakedocker") {
		t.Fatalf("go list -deps . gave no list of this package's dependencies: %s", deps)
	}
	for _, d := range deps {
		switch {
		case d == "testing", d == "net/http/httptest", strings.HasPrefix(d, "github.com/stretchr/"):
			t.Errorf("the package links %s", d)
		case d == "github.com/monky/monky-deployd/deployd", strings.HasPrefix(d, "github.com/monky/monky-deployd/deployd/compose"):
			t.Errorf("the package links the agent's %s", d)
		}
	}
}
