package composecheck

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/template"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

func FuzzCheck(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	require.NoError(f, err)
	for _, p := range paths {
		content, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(string(content))
	}
	f.Add("services: {a: {image: x, volumes: ['${A:-${B}}:/x']}}")
	f.Add("x: &a [*a]")
	f.Add("services:\n  a:\n    extends: {file: 1, service: b}\n")
	f.Fuzz(func(t *testing.T, content string) {
		in := composeInput(content, nil)
		in.Vars, in.SecretNames = map[string]string{"SET": "hunter2-fuzz-value"}, []string{"SECRET"}
		got := Check(context.Background(), in)
		require.True(t, slices.IsSorted(got.Services))
		for _, finding := range got.Findings {
			require.NotContains(t, finding.Detail, "hunter2-fuzz-value")
			require.NotContains(t, finding.Detail, secretPlaceholder)
		}
	})
}

// captureWarnings collects the names compose-go warns about ("The "X" variable is not
// set"), which is how compose-go itself reports a variable it blanked.
type captureWarnings struct{ names []string }

func (h *captureWarnings) Levels() []logrus.Level { return []logrus.Level{logrus.WarnLevel} }

func (h *captureWarnings) Fire(e *logrus.Entry) error {
	if name, ok := strings.CutPrefix(e.Message, `The "`); ok {
		name, _, _ = strings.Cut(name, `"`)
		h.names = append(h.names, name)
	}
	return nil
}

// composeBlanks runs compose-go's own substitution and returns its output, the
// variables it blanked with a warning and its error. Test-only: it swaps the global logrus
// hooks and output for the duration of the call.
func composeBlanks(s string, mapping template.Mapping) (string, []string, error) {
	std := logrus.StandardLogger()
	hook := &captureWarnings{}
	oldHooks := std.ReplaceHooks(logrus.LevelHooks{})
	oldOut := std.Out
	std.AddHook(hook)
	std.SetOutput(io.Discard)
	defer func() {
		std.ReplaceHooks(oldHooks)
		std.SetOutput(oldOut)
	}()
	out, err := template.Substitute(s, mapping)
	return out, hook.names, err
}

var resolverSeeds = []string{
	"plain", "$X", "${X}", "$$X", "$${X}", "${SET}", "${EMPTY}", "$SET$X",
	"${X:-d}", "${X-d}", "${EMPTY:-d}", "${EMPTY-d}", "${X:+p}", "${SET:+p}", "${EMPTY+p}",
	"${X:?m}", "${X?m}", "${EMPTY:?m}", "${EMPTY?m}", "${SET:?m}",
	"${X:-${Y}}", "${SET:-${Y}}", "${SET:+${Y}}", "${X:-${Y:-z}}", "${X:-a}${Y}", "${X:-a}b${Y:-c}",
	"${X-{a}:?b}", "a${", "${X:}", "${", "$", "${SET}}", "${X:-}}", "${X:-a}}${Y}", "$ {X}", "${1X}",
	"${X:?${Y}}", "${X?}${Y}", "${x:-${SET}}", "${X:-$$}", "${X:-$Y}", "${X+${Y}}${Z}",
}

func testMapping(name string) (string, bool) {
	switch name {
	case "SET":
		return "v", true
	case "EMPTY":
		return "", true
	}
	return "", false
}

// checkAgainstCompose asserts that the strict resolver agrees with compose-go's own
// substitution: same output, and exactly the variables compose-go blanks or requires.
func checkAgainstCompose(t *testing.T, s string) {
	want, blanked, wantErr := composeBlanks(s, testMapping)
	r := &resolver{lookup: testMapping, unresolved: map[string]string{}}
	got, gotErr := r.substitute(s)

	var wantInvalid, gotInvalid *template.InvalidTemplateError
	var missing *template.MissingRequiredError
	switch {
	case errors.As(wantErr, &wantInvalid):
		require.ErrorAs(t, gotErr, &gotInvalid, "compose rejects %q", s)
		return
	case errors.As(gotErr, &gotInvalid):
		require.Error(t, wantErr, "resolver rejects %q, compose accepts it", s)
		return
	case errors.As(wantErr, &missing):
		require.NoError(t, gotErr)
		require.Contains(t, r.unresolved, missing.Variable, "%q", s)
		return
	}
	require.NoError(t, wantErr)
	require.NoError(t, gotErr)
	require.Equal(t, want, got, "output of %q", s)
	gotNames := slices.Sorted(mapKeys(r.unresolved))
	slices.Sort(blanked)
	blanked = slices.Compact(blanked)
	if len(blanked) == 0 {
		blanked = nil
	}
	if len(gotNames) == 0 {
		gotNames = nil
	}
	require.Equal(t, blanked, gotNames, "unresolved variables of %q", s)
}

func TestResolverMatchesCompose(t *testing.T) {
	for _, s := range resolverSeeds {
		t.Run(s, func(t *testing.T) { checkAgainstCompose(t, s) })
	}
}

func FuzzResolverMatchesCompose(f *testing.F) {
	for _, s := range resolverSeeds {
		f.Add(s)
	}
	f.Fuzz(checkAgainstCompose)
}
