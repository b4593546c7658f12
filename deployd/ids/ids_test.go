package ids_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd/ids"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

var (
	envIDRE = regexp.MustCompile(ids.EnvIDPattern)
	shaRE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

var envIDCases = []struct {
	in string
	ok bool
}{
	{"env-dev-01", true}, {"env-prod-99", true}, {"env-a1b2-00", true}, {"env-x-12", true},
	{"", false}, {"env-", false}, {"env--01", false}, {"env-dev-1", false}, {"env-dev-001", false},
	{"env-Dev-01", false}, {"env-dev_x-01", false}, {"env-dev-x-01", false}, {"Env-dev-01", false},
	{"env-dev-01\n", false}, {" env-dev-01", false}, {"env-dev-0a", false}, {"env-dev+01", false},
	{"xenv-dev-01", false}, {"env-dév-01", false},
}

var shaCases = []struct {
	in string
	ok bool
}{
	{strings.Repeat("a", 64), true}, {strings.Repeat("0123456789abcdef", 4), true},
	{"", false}, {strings.Repeat("a", 63), false}, {strings.Repeat("a", 65), false},
	{strings.Repeat("A", 64), false}, {strings.Repeat("g", 64), false},
	{strings.Repeat("a", 63) + "\n", false}, {"sha256:" + strings.Repeat("a", 57), false},
}

func TestValidEnvID(t *testing.T) {
	for _, c := range envIDCases {
		assert.Equal(t, c.ok, ids.ValidEnvID(c.in), "%q", c.in)
		assert.Equal(t, envIDRE.MatchString(c.in), ids.ValidEnvID(c.in), "%q: the pattern agrees", c.in)
	}
}

func TestValidSHA(t *testing.T) {
	for _, c := range shaCases {
		assert.Equal(t, c.ok, ids.ValidSHA(c.in), "%q", c.in)
		assert.Equal(t, shaRE.MatchString(c.in), ids.ValidSHA(c.in), "%q: the pattern agrees", c.in)
	}
}

// FuzzValid checks both validators against their regular expressions.
func FuzzValid(f *testing.F) {
	for _, c := range envIDCases {
		f.Add(c.in)
	}
	for _, c := range shaCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ids.ValidEnvID(s), envIDRE.MatchString(s); got != want {
			t.Fatalf("ValidEnvID(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := ids.ValidSHA(s), shaRE.MatchString(s); got != want {
			t.Fatalf("ValidSHA(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

func TestLeaf(t *testing.T) {
	assert.Equal(t, []string{"github.com/monky/monky-deployd/deployd/ids"}, testprog.NonStdDeps(t, "."))
}

func ExampleValidEnvID() {
	fmt.Println(ids.ValidEnvID("env-dev-01"), ids.ValidEnvID("env-dev-1"))
	// Output: true false
}
