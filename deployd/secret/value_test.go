package secret_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/secret"
)

func TestValuePrintPaths(t *testing.T) {
	const raw = "hvs.CAESIJ-value-under-test"
	v := secret.New(raw)
	type holder struct {
		Name  string
		Token secret.Value
	}
	h := holder{Name: "n", Token: v}
	tests := []struct {
		name string
		got  func() string
		want string
	}{
		{"String", v.String, M},
		{"GoString", v.GoString, `secret.Value("` + M + `")`},
		{"%v", func() string { return fmt.Sprintf("%v", v) }, M},
		{"%+v", func() string { return fmt.Sprintf("%+v", v) }, M},
		{"%#v", func() string { return fmt.Sprintf("%#v", v) }, `secret.Value("` + M + `")`},
		{"%s", func() string { return fmt.Sprintf("%s", v) }, M},
		{"%q", func() string { return fmt.Sprintf("%q", v) }, `"` + M + `"`},
		{"%x", func() string { return fmt.Sprintf("%x", v) }, M},
		{"%X", func() string { return fmt.Sprintf("%X", v) }, M},
		{"%d", func() string { return fmt.Sprintf("%d", v) }, M},
		{"pointer %v", func() string { return fmt.Sprintf("%v", &v) }, M},
		{"in a struct %+v", func() string { return fmt.Sprintf("%+v", h) }, "{Name:n Token:" + M + "}"},
		{"in a struct %#v", func() string { return fmt.Sprintf("%#v", h) },
			`secret_test.holder{Name:"n", Token:secret.Value("` + M + `")}`},
		{"in a map %v", func() string { return fmt.Sprint(map[string]secret.Value{"k": v}) }, "map[k:" + M + "]"},
		{"in a slice %v", func() string { return fmt.Sprint([]secret.Value{v}) }, "[" + M + "]"},
		{"json in a struct", func() string { b, _ := json.Marshal(h); return string(b) }, `{"Name":"n","Token":"` + M + `"}`},
		{"json as a map value", func() string {
			b, _ := json.Marshal(map[string]secret.Value{"k": v})
			return string(b)
		}, `{"k":"` + M + `"}`},
		{"json as a map key", func() string {
			b, _ := json.Marshal(map[secret.Value]int{v: 1})
			return string(b)
		}, `{"` + M + `":1}`},
		{"slog text", func() string { return logLine(slog.NewTextHandler, "tok", v) }, "level=INFO msg=m tok=" + M + "\n"},
		{"slog json", func() string { return logLine(slog.NewJSONHandler, "tok", v) }, `{"level":"INFO","msg":"m","tok":"` + M + `"}` + "\n"},
		{"slog text struct", func() string { return logLine(slog.NewTextHandler, "h", h) }, "level=INFO msg=m h=\"{Name:n Token:" + M + "}\"\n"},
		{"slog json struct", func() string { return logLine(slog.NewJSONHandler, "h", h) },
			`{"level":"INFO","msg":"m","h":{"Name":"n","Token":"` + M + `"}}` + "\n"},
		{"slog json map", func() string { return logLine(slog.NewJSONHandler, "m", map[string]secret.Value{"k": v}) },
			`{"level":"INFO","msg":"m","m":{"k":"` + M + `"}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.got()
			assert.Equal(t, tt.want, got)
			assert.NotContains(t, got, raw)
			assert.NotContains(t, got, "CAESIJ")
		})
	}
}

// logLine logs one record with attribute k=v through a handler made by mk, without time.
func logLine[H slog.Handler](mk func(w io.Writer, o *slog.HandlerOptions) H, k string, v any) string {
	var buf bytes.Buffer
	slog.New(mk(&buf, &slog.HandlerOptions{ReplaceAttr: noTime})).Info("m", k, v)
	return buf.String()
}

// noTime drops the time of a record (slog.HandlerOptions.ReplaceAttr).
func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestValueBasics(t *testing.T) {
	var zero secret.Value
	assert.True(t, zero.IsZero())
	assert.Empty(t, zero.String())
	assert.Empty(t, fmt.Sprint(zero))
	v := secret.New("abc-def")
	assert.False(t, v.IsZero())
	assert.Equal(t, "abc-def", v.Reveal())
	b, err := v.MarshalText()
	require.NoError(t, err)
	assert.Equal(t, M, string(b))
	assert.False(t, strings.Contains(fmt.Sprintf("%v %s %q %x %#v", v, v, v, v, v), "abc-def"))
}
