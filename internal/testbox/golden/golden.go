// Package golden is the one golden-file helper of this module's tests: where a golden
// file lives (testdata/<name> of the test's package), how go test -update rewrites it,
// and how a mismatch is reported (a diff, and the command that rewrites the file).
//
// It registers the test binary's only -update flag, so a package that imports it
// declares none of its own (the names would clash). Code that regenerates fixtures
// besides its goldens asks Update. It imports the standard library and testify only,
// and only tests import it.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// msg says which file a mismatch is about and how to accept the change.
const msg = "got differs from the golden file %s (- the file, + got); if the change is intended, run go test -update and review the diff"

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ (and the fixtures generated with them) instead of comparing")

// Update reports whether the test runs with -update: golden files and generated
// fixtures are rewritten, not compared. It is false until the test binary has parsed
// its flags, so call it from a test, not from a package initializer.
func Update() bool { return *update }

// Path is the file of the golden name: testdata/<name> of the test's package (the
// working directory of go test), name slash-separated.
func Path(name string) string {
	return filepath.Join("testdata", filepath.FromSlash(name))
}

// Assert compares got with the golden file testdata/<name>, byte for byte. With
// -update it first writes got there (and the directories it needs). A missing file
// stops the test; a difference fails it with a diff and goes on.
func Assert(t testing.TB, name string, got []byte) {
	t.Helper()
	want := read(t, name, got)
	assert.Equal(t, string(want), string(got), msg, Path(name))
}

// AssertJSON is Assert for a golden JSON document: got and the file must hold equal
// JSON, whatever their spacing and key order.
func AssertJSON(t testing.TB, name string, got []byte) {
	t.Helper()
	want := read(t, name, got)
	assert.JSONEq(t, string(want), string(got), msg, Path(name))
}

// read returns the golden file of name, written from got first under -update.
func read(t testing.TB, name string, got []byte) []byte {
	t.Helper()
	p := Path(name)
	if Update() {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, got, 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "golden file %s: run go test -update to create it", p)
	return want
}
