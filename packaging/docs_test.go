package packaging_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The docs are the operator's view of the agent: these tests keep them true of the code
// (the README, the CHANGELOG and docs/*.md, read from the repository root).

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = ".."

// docFiles returns the repository's markdown docs, relative to the root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, more)
	for _, f := range more {
		rel, err := filepath.Rel(repoRoot, f)
		require.NoError(t, err)
		files = append(files, rel)
	}
	return files
}

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	require.NoError(t, err)
	return string(b)
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	// A doc named in text or a comment: "docs/FAKES.md", "PROTOCOL.md".
	docMention = regexp.MustCompile(`\b(?:docs/)?[A-Z][A-Za-z0-9-]*\.md\b`)
	slugDrop   = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// anchors returns the anchors of the headings of a markdown text, outside code blocks.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if m := mdHeading.FindStringSubmatch(line); m != nil && !inCode {
			out[slug(m[1])] = true
		}
	}
	return out
}

func TestSlug(t *testing.T) {
	assert.Equal(t, "openbao-how-the-agent-uses-it", slug("OpenBao: how the agent uses it"))
	assert.Equal(t, "1-check-in--post-v1agentcheckin", slug("1. Check-in — `POST /v1/agent/checkin`"))
	assert.Equal(t, "memory-and-speed", slug("Memory and speed"))
}

// TestDocLinks checks that every relative link of the docs reaches a file of the
// repository and, with a #fragment, a heading of that file.
func TestDocLinks(t *testing.T) {
	for _, doc := range docFiles(t) {
		text := readRepoFile(t, doc)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			resolved := doc
			if file != "" {
				resolved = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(filepath.Join(repoRoot, resolved)); err != nil {
					t.Errorf("%s: link %q: no such file %s", doc, target, resolved)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(resolved, ".md") && !anchors(readRepoFile(t, resolved))[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", doc, target, resolved, frag)
			}
		}
	}
}

// TestDocMentionsExist checks that every doc named in the docs and in the Go code's
// comments ("docs/FAKES.md", "`PROTOCOL.md`") exists. SPEC.md is the project's
// contract, kept outside this repository.
func TestDocMentionsExist(t *testing.T) {
	exists := func(name string) bool {
		for _, p := range []string{name, filepath.Join("docs", name)} {
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err == nil {
				return true
			}
		}
		return false
	}
	check := func(file, text string) {
		for _, name := range docMention.FindAllString(text, -1) {
			if name != "SPEC.md" && !exists(name) {
				t.Errorf("%s names %s, which does not exist", file, name)
			}
		}
	}
	for _, doc := range docFiles(t) {
		check(doc, readRepoFile(t, doc))
	}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			check(path, string(b))
		}
		return nil
	})
	require.NoError(t, err)
}
