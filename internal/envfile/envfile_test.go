package envfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// hostile is the table of values that a naive NAME=value writer gets wrong.
var hostile = []struct {
	name  string
	value string
}{
	{"empty", ""},
	{"plain", "info"},
	{"single_quote", "it's"},
	{"only_single_quote", "'"},
	{"double_quote", `say "hi"`},
	{"both_quotes", `it's "quoted"`},
	{"dollar", "pa$word"},
	{"dollar_end", "cost$"},
	{"dollar_braced", "${HOME}"},
	{"dollar_braced_default", "${HOME:-/root}"},
	{"dollar_required", "${X:?boom}"},
	{"dollar_dollar", "$$"},
	{"dollar_named_in_double", `a'b$HOME`},
	{"dollar_braced_in_double", `a'b${HOME}`},
	{"hash", "#notacomment"},
	{"space_hash", "value #notacomment"},
	{"backslash", `C:\path\to`},
	{"backslash_n_literal", `a\nb`},
	{"double_backslash", `a\\b`},
	{"trailing_backslash", `ends\`},
	{"backslash_quote", `\'`},
	{"backslash_dquote", `\"`},
	{"backslash_dollar", `\$X`},
	{"backslash_zero", `\0123`},
	{"leading_trailing_space", "  padded  "},
	{"only_spaces", "   "},
	{"newline", "line1\nline2"},
	{"crlf", "line1\r\nline2"},
	{"trailing_newline", "pem\n"},
	{"tab", "a\tb"},
	{"equals", "a=b=c"},
	{"colon", "key: value"},
	{"unicode", "grüße ☃ 日本語"},
	{"nbsp", "\u00a0x\u00a0"},
	{"nel", "\u0085"},
	{"control", "a\x01b\x1fc\x7f"},
	{"vertical_tab_formfeed", "a\vb\fc"},
	{"export", "export FOO=bar"},
	{"pem", "-----BEGIN KEY-----\nMIIB\\+/=\n-----END KEY-----\n"},
	{"json", `{"a":"b$c","d":['e']}`},
	{"backticks", "`id`"},
}

func TestRenderRoundTrip(t *testing.T) {
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			in := map[string]string{"VALUE": tc.value, "HOME": "/home/x", "X": "set"}
			out, err := Render(in)
			require.NoError(t, err)
			assertRoundTrip(t, in, out)
		})
	}
}

func TestRenderAllHostileInOneFile(t *testing.T) {
	// Later lines may interpolate earlier ones in dotenv: one file with every value
	// proves that no line leaks into another.
	in := map[string]string{}
	for _, tc := range hostile {
		in["V_"+strings.ToUpper(tc.name)] = tc.value
	}
	out, err := Render(in)
	require.NoError(t, err)
	assertRoundTrip(t, in, out)
	assert.Equal(t, len(in), bytes.Count(out, []byte("\n")), "one line per variable")
}

func assertRoundTrip(t *testing.T, want map[string]string, rendered []byte) {
	t.Helper()
	// The two entry points compose uses to read a project's .env.
	got, err := dotenv.UnmarshalBytesWithLookup(rendered, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = dotenv.ParseWithLookup(bytes.NewReader(rendered), func(string) (string, bool) {
		return "from-process-env", true
	})
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestRenderSortedLines(t *testing.T) {
	out, err := Render(map[string]string{"b": "2", "A": "1", "_z": "3", "a": "0"})
	require.NoError(t, err)
	assert.Equal(t, "A='1'\n_z='3'\na='0'\nb='2'\n", string(out))
	for _, in := range []map[string]string{nil, {}} {
		out, err := Render(in)
		require.NoError(t, err)
		assert.Empty(t, out)
	}
}

func TestRenderErrors(t *testing.T) {
	const planted = "s3cr3t-planted-value"
	tests := []struct {
		name    string
		vars    map[string]string
		wantErr error
		varName string
	}{
		{"leading_digit", map[string]string{"1X": planted}, ErrInvalidName, "1X"},
		{"dash", map[string]string{"A-B": planted}, ErrInvalidName, "A-B"},
		{"dot", map[string]string{"A.B": planted}, ErrInvalidName, "A.B"},
		{"space", map[string]string{"A B": planted}, ErrInvalidName, "A B"},
		{"empty_name", map[string]string{"": planted}, ErrInvalidName, ""},
		{"export_prefix", map[string]string{"export X": planted}, ErrInvalidName, "export X"},
		{"unicode_name", map[string]string{"Ä": planted}, ErrInvalidName, "Ä"},
		{"nul", map[string]string{"OK": "fine", "TOKEN": planted + "\x00tail"}, ErrUnrepresentable, "TOKEN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tc.vars)
			require.Error(t, err)
			assert.Nil(t, out)
			assert.ErrorIs(t, err, tc.wantErr)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.varName, e.Name)
			assert.NotContains(t, err.Error(), planted)
		})
	}
}

// TestValidName: the one rule for a variable name (bundle's vars and secrets use it too).
func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"A": true, "_": true, "a_b": true, "DB_PASSWORD": true, "x1": true, "_9": true,
		"": false, "1X": false, "A-B": false, "A.B": false, "A B": false, "export X": false,
		"Ä": false, "A\n": false, "A=B": false, "$A": false,
	} {
		assert.Equal(t, want, ValidName(name), "%q", name)
	}
}

func TestErrorIsDistinct(t *testing.T) {
	err := error(&Error{Name: "X", Err: ErrInvalidName})
	assert.True(t, errors.Is(err, ErrInvalidName))
	assert.False(t, errors.Is(err, ErrUnrepresentable))
	assert.Equal(t, `envfile: variable "X": invalid variable name`, err.Error())
}

func TestGolden(t *testing.T) {
	in := map[string]string{
		"COMPOSE_PROJECT_NAME": "monky",
		"LOG_LEVEL":            "info",
		"DB_PASSWORD":          `p'a"s$s\w#rd`,
		"GREETING":             "hello world # not a comment",
		"TEMPLATE":             "${NOT_INTERPOLATED}",
		"CERT":                 "-----BEGIN CERT-----\nAAAA\n-----END CERT-----\n",
		"EMPTY":                "",
	}
	out, err := Render(in)
	require.NoError(t, err)
	golden.Assert(t, "golden.env", out)
	want, err := os.ReadFile(golden.Path("golden.env"))
	require.NoError(t, err)
	assertRoundTrip(t, in, want)
}

func FuzzRoundTrip(f *testing.F) {
	for _, tc := range hostile {
		f.Add("VALUE", tc.value)
	}
	f.Add("1BAD", "x")
	f.Add("OK", "a\x00b")
	f.Add("OK", "\xff\xfe")
	f.Fuzz(func(t *testing.T, name, value string) {
		in := map[string]string{name: value}
		out, err := Render(in)
		if err != nil {
			var e *Error
			require.ErrorAs(t, err, &e)
			// The message names the variable and the reason, nothing else: never the value.
			require.Equal(t, fmt.Sprintf("envfile: variable %q: %v", name, e.Err), err.Error())
			require.Equal(t, name, e.Name)
			if nameRE.MatchString(name) && utf8.ValidString(value) && !strings.ContainsRune(value, 0) {
				t.Fatalf("valid name and valid UTF-8 value without NUL refused: %v", err)
			}
			return
		}
		got, err := dotenv.UnmarshalBytesWithLookup(out, nil)
		require.NoError(t, err)
		require.Equal(t, in, got)
	})
}
