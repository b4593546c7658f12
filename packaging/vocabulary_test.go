package packaging_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestVocabulary checks the vocabulary rule (docs/ARCHITECTURE.md, "Vocabulary") across the docs, the packaging and the
// agent's code (comments, identifiers, log messages): never the word "tenant", whose
// one exception, monky-tenancy, is another word. Test files are left to their packages.
func TestVocabulary(t *testing.T) {
	tenant := regexp.MustCompile(`(?i)\btenants?\b`)
	exts := []string{".md", ".go", ".sh", ".yml", ".yaml", ".j2", ".py", ".service", ".timer", ".example"}
	for _, rel := range repoFiles(t) {
		if strings.HasSuffix(rel, "_test.go") || !slices.Contains(exts, filepath.Ext(rel)) {
			continue
		}
		for i, line := range strings.Split(readRepoFile(t, rel), "\n") {
			if tenant.MatchString(line) {
				t.Errorf("%s:%d: the word \"tenant\" (the vocabulary rule): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
	}
}
