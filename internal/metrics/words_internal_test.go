package metrics

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWordShapes: the hand-written checks accept what the former regular expressions
// did (^[0-9A-Za-z][0-9A-Za-z.+~-]{0,63}$, ^[A-Z][A-Z0-9_]{0,63}$, ^[a-z][a-z-]{0,31}$)
// and nothing else.
func TestWordShapes(t *testing.T) {
	res := map[string]*regexp.Regexp{
		"version": regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+~-]{0,63}$`),
		"code":    regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`),
		"restore": regexp.MustCompile(`^[a-z][a-z-]{0,31}$`),
	}
	fns := map[string]func(string) bool{"version": isVersion, "code": isCode, "restore": isRestore}
	inputs := []string{"", "0.1.0", "1.2.3+git~1-x", ".1", "-a", "v", "UNAVAILABLE", "A_1", "_A", "a", "restored-healthy",
		"restore-failed", "Restore", "a b", "é", strings.Repeat("a", 32), strings.Repeat("a", 33), strings.Repeat("A", 64),
		strings.Repeat("A", 65), strings.Repeat("1", 64), strings.Repeat("1", 65), "A\n", "a\x00"}
	for name, re := range res {
		for _, in := range inputs {
			assert.Equal(t, re.MatchString(in), fns[name](in), "%s(%q)", name, in)
		}
	}
}
