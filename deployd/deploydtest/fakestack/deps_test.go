package fakestack_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestLinksNoTesting: the fakes, the fake docker program and examples/quickstart link
// neither testing nor httptest (nor testify); the fakes link no deployd/bundle, and the
// fake docker neither the agent's deployd nor its deployd/compose.
func TestLinksNoTesting(t *testing.T) {
	const mod = "github.com/monky/monky-deployd/"
	for _, pkg := range []string{"fakestack", "faketenancy", "fakebao", "fakedocker", "cmd/fake-docker", "examples/quickstart"} {
		path := mod + pkg
		if !strings.Contains(pkg, "/") {
			path = mod + "deployd/deploydtest/" + pkg
		}
		deps := testprog.Deps(t, path)
		if !assert.Contains(t, deps, path, "go list -deps %s gave no list of its dependencies: %s", path, deps) {
			continue
		}
		for _, d := range deps {
			switch {
			case d == "testing", d == "net/http/httptest", strings.HasPrefix(d, "github.com/stretchr/"):
				t.Errorf("%s links %s", pkg, d)
			case d == mod+"deployd/bundle" && pkg != "examples/quickstart":
				t.Errorf("%s links the agent's bundle package", pkg)
			case (d == mod+"deployd" || strings.HasPrefix(d, mod+"deployd/compose")) && slices.Contains([]string{"fakedocker", "cmd/fake-docker"}, pkg):
				t.Errorf("%s links the agent's %s", pkg, d)
			}
		}
	}
}
