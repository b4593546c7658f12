package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoad reads testdata/loop: uses of functions, of a type, its field and its
// method count, each with the names it takes; a local name is no use; of the loop
// a -> b -> c -> a one use runs back up.
func TestLoad(t *testing.T) {
	g, err := load("testdata/loop")
	require.NoError(t, err)
	assert.Equal(t, []string{"a.go", "b.go", "c.go", "m.go", "t.go", "z.go"}, g.files)
	assert.Equal(t, map[use][]string{
		{"a.go", "b.go"}: {"B"},
		{"b.go", "c.go"}: {"C"},
		{"c.go", "a.go"}: {"A"},
		{"z.go", "t.go"}: {"F", "T"},
		{"z.go", "m.go"}: {"M"},
		{"m.go", "t.go"}: {"T"},
	}, g.uses)
	assert.Equal(t, map[string]int{"a.go": 3, "b.go": 2, "c.go": 1, "z.go": 3, "m.go": 2, "t.go": 1}, g.floor)
	assert.Equal(t, map[use]bool{{"c.go", "a.go"}: true}, g.up)

	var out strings.Builder
	g.print(&out, false)
	assert.Equal(t, `github.com/monky/monky-deployd/tools/floors/testdata/loop: 6 files on 3 floors; 6 uses between files, 1 of them back up a floor
floor  3  a.go  6 lines
floor  3  z.go  8 lines
floor  2  b.go  4 lines
floor  2  m.go  4 lines
floor  1  c.go  7 lines
floor  1  t.go  4 lines
up    c.go (floor 1) -> a.go (floor 3): A
`, out.String())
}

// TestLayout: a file stands above every file it uses; where no loop forces it, no
// use runs back up; of two loops through one file, one use each runs back up (ties
// go by name).
func TestLayout(t *testing.T) {
	tests := []struct {
		name  string
		uses  []use
		floor map[string]int
		up    []use
	}{
		{"a stack", []use{{"a", "b"}, {"b", "c"}, {"a", "c"}}, map[string]int{"a": 3, "b": 2, "c": 1}, nil},
		{"a diamond", []use{{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}}, map[string]int{"a": 3, "b": 2, "c": 2, "d": 1}, nil},
		{"two files in a loop", []use{{"a", "b"}, {"b", "a"}}, map[string]int{"a": 2, "b": 1}, []use{{"b", "a"}}},
		{"two loops through b", []use{{"a", "b"}, {"b", "a"}, {"b", "c"}, {"c", "b"}}, map[string]int{"a": 3, "b": 2, "c": 1}, []use{{"b", "a"}, {"c", "b"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &graph{uses: map[use][]string{}}
			seen := map[string]bool{}
			for _, u := range tc.uses {
				g.uses[u] = []string{"x"}
				for _, f := range []string{u.from, u.to} {
					if !seen[f] {
						seen[f] = true
						g.files = append(g.files, f)
					}
				}
			}
			g.layout()
			assert.Equal(t, tc.floor, g.floor)
			want := map[use]bool{}
			for _, u := range tc.up {
				want[u] = true
			}
			assert.Equal(t, want, g.up)
		})
	}
}
