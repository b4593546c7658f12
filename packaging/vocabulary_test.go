package packaging_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVocabulary checks the vocabulary rule (docs/ARCHITECTURE.md, "Vocabulary") across the docs, the packaging and the
// agent's code (comments, identifiers, log messages): never the word "tenant", whose
// one exception, monky-tenancy, is another word. Test files are left to their packages.
func TestVocabulary(t *testing.T) {
	tenant := regexp.MustCompile(`(?i)\btenants?\b`)
	exts := []string{".md", ".go", ".sh", ".yml", ".yaml", ".j2", ".py", ".service", ".timer", ".example"}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasSuffix(path, "_test.go") || !slices.Contains(exts, filepath.Ext(path)) {
			return nil
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			if tenant.MatchString(line) {
				t.Errorf("%s:%d: the word \"tenant\" (the vocabulary rule): %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	require.NoError(t, err)
}
