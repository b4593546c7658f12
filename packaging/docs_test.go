package packaging_test

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
)

// The docs are the operator's view of the agent: these tests keep them true of the code
// (the README, DEVELOPERS.md, the CHANGELOG and docs/*.md, read from the repository root).

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = ".."

// docFiles returns the repository's markdown docs, relative to the root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "DEVELOPERS.md", "CHANGELOG.md"}
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

// repoFiles returns the paths of the repository's files (.git apart), relative to the root.
func repoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if err == nil && d.Name() == ".git" {
				return filepath.SkipDir
			}
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	require.NoError(t, err)
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

// TestDocLinks checks that every relative link of the docs reaches a file of the
// repository and, with a #fragment, a heading of that file (slug is GitHub's anchor).
func TestDocLinks(t *testing.T) {
	assert.Equal(t, "openbao-how-the-agent-uses-it", slug("OpenBao: how the agent uses it"))
	assert.Equal(t, "1-check-in--post-v1agentcheckin", slug("1. Check-in — `POST /v1/agent/checkin`"))
	assert.Equal(t, "memory-and-speed", slug("Memory and speed"))
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
	for _, rel := range repoFiles(t) {
		if strings.HasSuffix(rel, ".go") && !slices.Contains(strings.Split(rel, "/"), "testdata") {
			check(rel, readRepoFile(t, rel))
		}
	}
}

// TestBundleDocReservedNames checks that docs/BUNDLE.md names every variable name and
// prefix that deployd/bundle reserves (refused in vars and secrets): a renderer author
// reads the list there.
func TestBundleDocReservedNames(t *testing.T) {
	src := readRepoFile(t, "deployd/bundle/paths.go")
	doc := readRepoFile(t, "docs/BUNDLE.md")
	quoted := regexp.MustCompile(`"([A-Z_]+)"`)
	for _, decl := range []string{`reservedEnvPrefixes = []string{`, `reservedEnvNames = map[string]bool{`} {
		i := strings.Index(src, decl)
		require.GreaterOrEqual(t, i, 0, "deployd/bundle/paths.go has no %s", decl)
		body := src[i+len(decl):]
		body = body[:strings.Index(body, "}")]
		names := quoted.FindAllStringSubmatch(body, -1)
		require.NotEmpty(t, names, decl)
		for _, m := range names {
			assert.True(t, strings.Contains(doc, "`"+m[1]+"`"), "docs/BUNDLE.md does not name the reserved %s", m[1])
		}
	}
}

// TestOperationsNamesEveryOption checks that docs/OPERATIONS.md names every flag of the
// agent binary and its usage-error exit code, and every option of install.sh.
func TestOperationsNamesEveryOption(t *testing.T) {
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	for file, option := range map[string]string{
		"cmd/monky-deployd/cli.go": `fs\.[A-Za-z0-9]+\("([a-z-]+)"`,
		"packaging/install.sh":     `(?m)^\t--([a-z-]+)\)`,
	} {
		opts := regexp.MustCompile(option).FindAllStringSubmatch(readRepoFile(t, file), -1)
		require.NotEmpty(t, opts, file)
		for _, m := range opts {
			named := regexp.MustCompile(`--` + regexp.QuoteMeta(m[1]) + `\b`).MatchString(ops)
			assert.True(t, named, "docs/OPERATIONS.md does not name %s's --%s", file, m[1])
		}
	}
	assert.True(t, regexp.MustCompile(`(?m)^\| 2 \|`).MatchString(ops), "the exit code table has no row for 2 (a usage error)")
}

// codeRow finds the code of a table row: "| `CODE` | …".
var codeRow = regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\|")

// tableCodes returns the codes of the table rows of a markdown text, in order.
func tableCodes(md string) []codes.Code {
	var out []codes.Code
	for _, m := range codeRow.FindAllStringSubmatch(md, -1) {
		out = append(out, codes.Code(m[1]))
	}
	return out
}

// TestDocsNameEveryCode checks that every stable code the agent can log, report or
// show in status (deployd/codes) has a row in docs/OPERATIONS.md, which tells the
// operator what to do, and that the doc names no code the agent does not have. Both
// follow the order of codes.All. The refusal table of docs/BUNDLE.md lists exactly
// the refusal codes, in the order of codes.Refusals.
func TestDocsNameEveryCode(t *testing.T) {
	// CONFIG is a code of the OpenBao client alone: the agent reports a bad OpenBao
	// client config as CONFIG_INVALID. docs/PROTOCOL.md names it.
	want := slices.DeleteFunc(codes.All(), func(c codes.Code) bool { return c == codes.Config })
	// The rules table ("What each code means") is rendered from deployd/failure.go
	// and checked there (TestOperationsTableIsTheRules); these are the "when" tables.
	doc := regexp.MustCompile(`(?s)<!-- BEGIN rules.*?<!-- END rules -->`).ReplaceAllString(readRepoFile(t, "docs/OPERATIONS.md"), "")
	assert.Equal(t, want, tableCodes(doc), "the code tables of docs/OPERATIONS.md")
	assert.Contains(t, tableCodes(readRepoFile(t, "docs/PROTOCOL.md")), codes.Config, "docs/PROTOCOL.md has no table row for %s", codes.Config)
	assert.Equal(t, codes.Refusals(), tableCodes(readRepoFile(t, "docs/BUNDLE.md")), "the refusal table of docs/BUNDLE.md")
}

// TestOperationsMetrics checks that docs/OPERATIONS.md lists exactly the metrics that
// internal/metrics writes.
func TestOperationsMetrics(t *testing.T) {
	src := readRepoFile(t, "internal/metrics/metrics.go")
	var code []string
	for _, m := range regexp.MustCompile(`(?:gauge|head)\("([a-z_]+)"`).FindAllStringSubmatch(src, -1) {
		code = append(code, "monky_deployd_"+m[1])
	}
	require.NotEmpty(t, code)
	var docs []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(monky_deployd_[a-z_]+)[{`]").FindAllStringSubmatch(readRepoFile(t, "docs/OPERATIONS.md"), -1) {
		docs = append(docs, m[1])
	}
	assert.ElementsMatch(t, code, docs)
}

// TestOperationsConfigKeys checks the config reference of docs/OPERATIONS.md against
// deployd.Config and deployd.DefaultConfig: every key has a row, every row is a key,
// and the default column shows DefaultConfig's value. config.yaml.example, install.sh
// and the ansible role send the operator there.
func TestOperationsConfigKeys(t *testing.T) {
	ops := readRepoFile(t, "docs/OPERATIONS.md")
	rows := map[string]string{} // key -> default column
	row := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| ([^|]*) \\|")
	for _, m := range row.FindAllStringSubmatch(ops, -1) {
		if strings.Contains(m[1], "_") || strings.Contains(m[1], ".") || m[1] == "tenancy" || m[1] == "windows" {
			rows[m[1]] = strings.TrimSpace(m[2])
		}
	}
	want := map[string]string{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		for i := range v.NumField() {
			key := prefix + v.Type().Field(i).Tag.Get("yaml")
			switch f := v.Field(i); {
			case f.Kind() == reflect.Struct:
				walk(f, key+".")
			case f.Kind() == reflect.Slice:
				want[key] = "`[]`"
			case f.Type() == reflect.TypeFor[deployd.Duration]():
				d := time.Duration(f.Int())
				short := strings.TrimSuffix(d.String(), "0s") // 5m0s → 5m, 8h0m0s → 8h0m
				if strings.HasSuffix(short, "h0m") {
					short = strings.TrimSuffix(short, "0m") // 8h0m → 8h
				}
				want[key] = "`" + strings.TrimSuffix(short, "m0") + "`"
				if d%time.Minute != 0 {
					want[key] = "`" + d.String() + "`"
				}
			case f.Kind() == reflect.String && f.String() == "":
				want[key] = "—"
			case f.Kind() == reflect.String:
				want[key] = "`" + f.String() + "`"
			default:
				want[key] = "`" + strconv.FormatInt(f.Int(), 10) + "`"
			}
		}
	}
	walk(reflect.ValueOf(deployd.DefaultConfig()), "")
	for key, def := range want {
		got, ok := rows[key]
		if !assert.True(t, ok, "config key %s has no row in docs/OPERATIONS.md", key) {
			continue
		}
		assert.Equal(t, def, got, "default of %s in docs/OPERATIONS.md", key)
	}
	for key := range rows {
		if strings.Contains(key, ".") || slices.Contains([]string{"env_id", "deploy_dir", "state_dir", "bootstrap_grant", "min_free_mb"}, key) {
			_, ok := want[key]
			assert.True(t, ok, "docs/OPERATIONS.md has a config row %s that is not a key", key)
		}
	}
}

// TestOperationsExplainsTheService checks that docs/OPERATIONS.md names every setting
// of the [Service] sections of the one-shot service and the loop service (their
// headers send the operator there); "`ProtectKernel*`" in the doc covers every setting
// with that prefix.
func TestOperationsExplainsTheService(t *testing.T) {
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
	for _, rel := range []string{serviceUnit, loopUnit} {
		u := readUnit(t, rel)
		maps.Copy(u["Service"], u["Install"]) // the settings after [Service] too
		for key := range u["Service"] {
			covered := words[key]
			for _, w := range wildcards {
				covered = covered || strings.HasPrefix(key, w)
			}
			if !covered {
				t.Errorf("docs/OPERATIONS.md does not explain %s's %s=", rel, key)
			}
		}
	}
}
