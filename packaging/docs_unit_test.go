package packaging_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestOperationsExplainsTheService checks that docs/OPERATIONS.md names every setting
// of the [Service] sections of the one-shot service and the loop service (their
// headers send the operator there); "`ProtectKernel*`" in the doc covers every setting
// with that prefix.
func TestOperationsExplainsTheService(t *testing.T) {
	for _, u := range []string{serviceUnit, loopUnit} {
		t.Run(u, func(t *testing.T) { explained(t, u) })
	}
}

func explained(t *testing.T, rel string) {
	unit := readRepoFile(t, rel)
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	var wildcards []string
	for _, m := range regexp.MustCompile("`([A-Z][A-Za-z]+)\\*`").FindAllStringSubmatch(ops, -1) {
		wildcards = append(wildcards, m[1])
	}
	named := regexp.MustCompile(`\b[A-Z][A-Za-z]+\b`)
	words := map[string]bool{}
	for _, w := range named.FindAllString(ops, -1) {
		words[w] = true
	}
	_, service, _ := strings.Cut(unit, "\n[Service]\n")
	for _, line := range strings.Split(service, "\n") {
		key, _, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		covered := words[key]
		for _, w := range wildcards {
			covered = covered || strings.HasPrefix(key, w)
		}
		if !covered {
			t.Errorf("docs/OPERATIONS.md does not explain %s's %s=", rel, key)
		}
	}
}
