package packaging_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestOperationsExplainsTheService checks that docs/OPERATIONS.md names every setting
// of the service unit's [Service] section (the unit's header sends the operator there);
// "`ProtectKernel*`" in the doc covers every setting with that prefix.
func TestOperationsExplainsTheService(t *testing.T) {
	unit := readRepoFile(t, "packaging/systemd/monky-deployd.service")
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
			t.Errorf("docs/OPERATIONS.md does not explain the service's %s=", key)
		}
	}
}
