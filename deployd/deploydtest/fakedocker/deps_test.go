package fakedocker_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoTesting: the package links neither "testing" nor httptest, nor the agent
// it stands beside.
func TestLinksNoTesting(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 || !strings.Contains(string(out), "github.com/monky/monky-deployd/internal/fakes/fakedocker") {
		t.Fatalf("go list -deps . gave no list of this package's dependencies: %s", out)
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
