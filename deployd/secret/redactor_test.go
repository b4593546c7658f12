package secret_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/slogtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/secret"
)

const M = secret.Mask

// redactor returns a new Redactor with secrets registered.
func redactor(secrets ...string) *secret.Redactor {
	r := secret.NewRedactor()
	for _, s := range secrets {
		r.Add(s)
	}
	return r
}

func TestRedactForms(t *testing.T) {
	const pw, dsnPW = `p@ss"w\rd$1&<x>'q`, "p@ss/w:rd#1 x+y"
	tests := []struct {
		name   string
		secret string
		in     string
		want   string
	}{
		{"raw", "hunter22", "password is hunter22.", "password is " + M + "."},
		{"every occurrence", "hunter22", "hunter22 hunter22hunter22", M + " " + M},
		{"json with html escaping", pw, mustJSON(pw), `"` + M + `"`},
		{"json without html escaping", pw, `{"v":"p@ss\"w\\rd$1&<x>'q"}`, `{"v":"` + M + `"}`},
		{"go quoted", pw, fmt.Sprintf("%q", pw), `"` + M + `"`},
		{"go quoted ascii", "pässwörd", fmt.Sprintf("%+q", "pässwörd"), `"` + M + `"`},
		{"dotenv single quoted", "it's-a-secret", `X='it\'s-a-secret'`, `X='` + M + `'`},
		{"dotenv double quoted", pw, `X="p@ss\"w\\rd\$1&<x>'q"`, `X="` + M + `"`},
		{"dotenv dollar doubled", "a$b$c$d", `X=a$$b$$c$$d`, `X=` + M},
		{"url query", "a b&c=d/e", "https://h/?t=" + url.QueryEscape("a b&c=d/e") + "&x=1", "https://h/?t=" + M + "&x=1"},
		{"url path", "a b/c?d", "https://h/" + url.PathEscape("a b/c?d"), "https://h/" + M},
		{"base64 alone", "s3cr3t-token", base64.StdEncoding.EncodeToString([]byte("s3cr3t-token")), M},
		{"base64 url alphabet", "\xfb\xff\xbf-secret", base64.URLEncoding.EncodeToString([]byte("\xfb\xff\xbf-secret")), M + "A=="},
		{"base64 inside basic auth", "s3cr3t-token",
			"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:s3cr3t-token")),
			// The edge characters mix bits of the neighbours and stay: at most 4 bits each.
			"Authorization: Basic dXNlcjp" + M + "4="},
		{"line of a multi-line value", "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\n-----END KEY-----\n", "got MIIEvQIBADANBgkq here", "got " + M + " here"},
		{"indented line of a multi-line value", "a: first-line\n  b: second-line\r\n", "value: b: second-line", "value: " + M},
		{"multi-line value in json", "line-one\nline-two", `{"v":"line-one\nline-two"}`, `{"v":"` + M + `"}`},
		{"short value as whole token", "ab", "ab=ab about tab ab", M + "=" + M + " about tab " + M},
		{"short value quoted", "ab", `{"pw":"ab"}`, `{"pw":"` + M + `"}`},
		{"short value inside a word stays", "ab", "abc xab", "abc xab"},
		{"one byte value", "7", "exit 7; 17 77 7", "exit " + M + "; 17 77 " + M},
		{"not registered", "hunter22", "hunter2", "hunter2"},
		// A password in a DSN in a container's log (part of a report's tail) is URL user
		// info (Go's url.URL.String, libpq, SQLAlchemy) or has every reserved byte escaped
		// (Python's quote(v, safe=""), encodeURIComponent), the hex digits in either case.
		{"url user info", dsnPW, (&url.URL{Scheme: "postgres", User: url.UserPassword("app", dsnPW), Host: "db:5432", Path: "/app"}).String(),
			"postgres://app:" + M + "@db:5432/app"},
		{"url user info, every byte escaped", dsnPW, "to postgres://app:p%40ss%2Fw%3Ard%231%20x%2By@db failed", "to postgres://app:" + M + "@db failed"},
		{"url user info, lowercase hex", dsnPW, "to postgres://app:p%40ss%2fw%3ard%231%20x%2by@db failed", "to postgres://app:" + M + "@db failed"},
		{"url user info in a line", dsnPW, "to postgres://app:p%40ss%2Fw%3Ard%231%20x%2By@db failed\n", "to postgres://app:" + M + "@db failed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := redactor(tt.secret)
			assert.Equal(t, tt.want, r.Redact(tt.in))
			assert.Equal(t, tt.want, string(r.RedactBytes([]byte(tt.in))))
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestRedactBase64EveryAlignment(t *testing.T) {
	const s = "correct-horse-battery"
	r := redactor(s)
	for _, prefix := range []string{"", "a", "ab", "abc", "user:", "x:"} {
		for _, suffix := range []string{"", "z", "zz", "\n"} {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
				in := enc.EncodeToString([]byte(prefix + s + suffix))
				out := r.Redact(in)
				assert.Contains(t, out, M, "prefix %q suffix %q", prefix, suffix)
				// Nothing that decodes to most of the secret is left.
				assert.Less(t, len(strings.ReplaceAll(out, M, "")), len(in)-len(s), "prefix %q suffix %q", prefix, suffix)
			}
		}
	}
}

func TestRedactOverlapping(t *testing.T) {
	r := redactor("abcdef", "defghi", "xyz-1234")
	assert.Equal(t, "<"+M+">", r.Redact("<abcdefghi>"))
	assert.Equal(t, M+" "+M, r.Redact("abcdefxyz-1234 defghi"))
	assert.Equal(t, M, r.Redact("abcdefabcdef"), "adjacent occurrences merge")
}

func TestRedactEmptyAndDuplicate(t *testing.T) {
	r := secret.NewRedactor()
	var _ secret.Registry = r
	r.Add("")
	assert.Equal(t, "nothing here", r.Redact("nothing here"))
	assert.Empty(t, r.Redact(""))
	r = redactor("", "dup-secret", "dup-secret")
	assert.Equal(t, M, r.Redact("dup-secret"))

	in := []byte("clean line")
	out := r.RedactBytes(in)
	assert.Equal(t, &in[0], &out[0], "no copy when nothing is redacted")
	in = []byte("x dup-secret")
	out = r.RedactBytes(in)
	assert.Equal(t, "x dup-secret", string(in), "input not modified")
	assert.Equal(t, "x "+M, string(out))
}

func TestRedactorConcurrent(t *testing.T) {
	r := secret.NewRedactor()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				s := fmt.Sprintf("secret-%d-%d", g, i)
				r.Add(s)
				assert.Equal(t, "v="+M, r.Redact("v="+s))
			}
		})
	}
	wg.Wait()
}

// planted is what a LogValuer resolves to.
type planted struct{ s string }

func (p planted) LogValue() slog.Value {
	return slog.GroupValue(slog.String("inner", p.s), slog.Int("n", 1))
}

type stringer struct{ s string }

func (s stringer) String() string { return "stringer " + s.s }

type plain struct{ Name, Token string }

func TestHandlerPlantedSecrets(t *testing.T) {
	const s = "Zm9vYmFyLXNlY3JldA-planted"
	const pin = "918273"
	r := secret.NewRedactor()
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil)))

	withBefore := log.With("early", s) // registered only later: still caught
	r.Add(s)
	r.Add(pin)

	log.Info("message carries "+s, "k", s)
	log.Info("groups", slog.Group("g", slog.String("a", s), slog.Group("h", slog.String("b", "x"+s+"y"))))
	log.Error("errors", "err", fmt.Errorf("login: %w", errors.New("bad token "+s)))
	log.Info("valuer", "v", planted{s})
	log.Info("stringer", "s", stringer{s})
	log.Info("any", "p", plain{Name: "n", Token: s}, "m", map[string]string{"t": s}, "b", []byte(s))
	log.Info("number", "pin", 918273, "u", uint64(918273), "f", 918273.0)
	log.Info("secret value", "tok", secret.New(s))
	log.Info(s, s, s) // as a key too
	withBefore.Info("with before")
	log.With("w", s).WithGroup("grp").With("w2", s).Info("with", "x", s)
	log.WithGroup("g2").Info("in group", slog.Any("err", errors.New(s)))

	out := buf.String()
	assert.NotContains(t, out, s)
	assert.NotContains(t, out, "Zm9vYmFy")
	assert.NotContains(t, out, pin)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 12)
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		assert.Contains(t, l, M, l)
	}
	assert.Contains(t, lines[1], `"g":{"a":"`+M+`","h":{"b":"x`+M+`y"}}`)
	assert.Contains(t, lines[2], `"err":"login: bad token `+M+`"`)
	assert.Contains(t, lines[3], `"v":{"inner":"`+M+`","n":1}`)
	assert.Contains(t, lines[6], `"pin":"`+M+`","u":"`+M+`","f":"`+M+`"`)
	assert.Contains(t, lines[10], `"w":"`+M+`","grp":{"w2":"`+M+`","x":"`+M+`"}`)
}

func TestHandlerLeavesCleanRecords(t *testing.T) {
	r := redactor("some-secret")
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn, ReplaceAttr: noTime})))
	log.Info("dropped by level")
	log.Warn("clean", "n", 3, "ok", true, "s", "text")
	assert.Equal(t, "level=WARN msg=clean n=3 ok=true s=text\n", buf.String())
	assert.False(t, log.Enabled(t.Context(), slog.LevelInfo))
}

func TestHandlerSlogtest(t *testing.T) {
	for _, secrets := range [][]string{nil, {"never-logged-secret", "x"}} {
		t.Run(fmt.Sprintf("%d secrets", len(secrets)), func(t *testing.T) {
			r := redactor(secrets...)
			var buf bytes.Buffer
			h := r.Handler(slog.NewJSONHandler(&buf, nil))
			results := func() []map[string]any {
				var ms []map[string]any
				for line := range bytes.Lines(buf.Bytes()) {
					var m map[string]any
					require.NoError(t, json.Unmarshal(line, &m))
					ms = append(ms, m)
				}
				return ms
			}
			require.NoError(t, slogtest.TestHandler(h, results))
		})
	}
}

func TestWriterSplitAcrossWrites(t *testing.T) {
	const s = "split-secret-value"
	r := redactor(s)
	text := "first line\nthe value is " + s + " ok\nlast " + s
	want := "first line\nthe value is " + M + " ok\nlast " + M
	for cut := range len(text) + 1 {
		var out bytes.Buffer
		w := r.Writer(&out)
		n, err := w.Write([]byte(text[:cut]))
		require.NoError(t, err)
		require.Equal(t, cut, n)
		n, err = w.Write([]byte(text[cut:]))
		require.NoError(t, err)
		require.Equal(t, len(text)-cut, n)
		require.NoError(t, w.Close())
		require.Equal(t, want, out.String(), "cut at %d", cut)
	}
}

func TestWriterEmitsCompleteLines(t *testing.T) {
	r := redactor("abcd-secret")
	var out bytes.Buffer
	w := r.Writer(&out)
	_, err := w.Write([]byte("one\ntwo abcd-"))
	require.NoError(t, err)
	assert.Equal(t, "one\n", out.String())
	_, err = w.Write([]byte("secret\nthree"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo "+M+"\n", out.String())
	require.NoError(t, w.Close())
	assert.Equal(t, "one\ntwo "+M+"\nthree", out.String())
	require.NoError(t, w.Close(), "second close writes nothing")
	assert.Equal(t, "one\ntwo "+M+"\nthree", out.String())
}

func TestWriterBound(t *testing.T) {
	const s = "bounded-secret-value"
	r := redactor(s)
	// One long line without a newline, written in chunks, with secrets everywhere,
	// including across the point where the writer has to flush.
	var in strings.Builder
	for in.Len() < 3*secret.WriterBound {
		in.WriteString("xxxxxxx " + s + " ")
	}
	var out bytes.Buffer
	w := r.Writer(&out)
	data := []byte(in.String())
	for len(data) > 0 {
		n := min(len(data), 1000+len(data)%7)
		_, err := w.Write(data[:n])
		require.NoError(t, err)
		data = data[n:]
		written := in.String()[:len(in.String())-len(data)]
		assert.LessOrEqual(t, len(r.Redact(written))-out.Len(), secret.WriterBound+len(s)+1000+7, "buffered too much")
	}
	assert.Positive(t, out.Len(), "flushed before the end")
	require.NoError(t, w.Close())
	assert.NotContains(t, out.String(), s)
	assert.Equal(t, strings.Count(in.String(), s), strings.Count(out.String(), M))
}

type failWriter struct{ err error }

func (f failWriter) Write(p []byte) (int, error) { return 0, f.err }

func TestWriterPassesErrors(t *testing.T) {
	boom := errors.New("boom")
	w := secret.NewRedactor().Writer(failWriter{boom})
	_, err := w.Write([]byte("a line\n"))
	require.ErrorIs(t, err, boom)
	_, err = w.Write([]byte("no newline"))
	require.NoError(t, err)
	require.ErrorIs(t, w.Close(), boom)
}

func TestWriterConcurrent(t *testing.T) {
	r := redactor("concurrent-secret")
	var out bytes.Buffer
	w := r.Writer(&out)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_, _ = w.Write([]byte("line concurrent-secret end\n"))
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Close())
	assert.Equal(t, 400, strings.Count(out.String(), "line "+M+" end\n"))
}

// unmask replaces every Mask by a NUL byte, so that what is left are the unredacted
// pieces of the input.
func unmask(s string) string { return strings.ReplaceAll(s, M, "\x00") }

func FuzzRedact(f *testing.F) {
	f.Add("hunter22", "pre ", " post")
	f.Add(`p@ss"w\rd`, `{"v":"`, `"}`)
	f.Add("abcdabcd", "abcdabc", "bcd")
	f.Add("ab", "x ", " y")
	f.Fuzz(func(t *testing.T, s, pre, post string) {
		r := redactor(s)
		if len(s) < secret.MinSubstringLen || strings.Contains(s, "\x00") {
			_ = r.Redact(pre + s + post)
			return
		}
		for _, in := range []string{pre + s + post, pre + strconv.Quote(s) + post, mustJSON(pre + s + post)} {
			out := r.Redact(in)
			if strings.Contains(unmask(out), s) {
				t.Fatalf("secret %q left in %q", s, out)
			}
			if got := string(r.RedactBytes([]byte(in))); got != out {
				t.Fatalf("RedactBytes %q != Redact %q", got, out)
			}
		}
	})
}

func FuzzWriter(f *testing.F) {
	f.Add("writer-secret", "a line\nwith writer-secret\n and more writer-secret", uint8(3))
	f.Fuzz(func(t *testing.T, s, text string, chunk uint8) {
		if len(s) < secret.MinSubstringLen || strings.ContainsAny(s, "\x00\n") {
			return
		}
		r := redactor(s)
		var out bytes.Buffer
		w := r.Writer(&out)
		step := int(chunk) + 1
		data := []byte(text)
		for len(data) > 0 {
			n := min(step, len(data))
			_, _ = w.Write(data[:n])
			data = data[n:]
		}
		_ = w.Close()
		if strings.Contains(unmask(out.String()), s) {
			t.Fatalf("secret %q left in %q", s, out.String())
		}
		if !strings.Contains(text, s) && !strings.Contains(text, M) && r.Redact(text) == text && out.String() != text {
			t.Fatalf("clean text changed: %q -> %q", text, out.String())
		}
	})
}

func BenchmarkRedact(b *testing.B) {
	r := secret.NewRedactor()
	for i := range 30 {
		r.Add(fmt.Sprintf("secret-value-number-%02d-%x", i, i*7919))
	}
	for name, line := range map[string]string{
		"CleanLine": `time=2026-11-30T10:00:00Z level=INFO msg="check-in" env_id=env-dev-01 action=apply sha=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 serial=17`,
		"DirtyLine": fmt.Sprintf(`level=INFO msg="compose output" line="DB_PASSWORD=secret-value-number-07-%x REDIS=secret-value-number-29-%x"`, 7*7919, 29*7919),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Redact(line)
			}
		})
	}
}

func ExampleRedactor() {
	r := secret.NewRedactor()
	r.Add("s3cr3t-pa55")
	fmt.Println(r.Redact(`login failed for DB_PASSWORD="s3cr3t-pa55"`))

	log := slog.New(r.Handler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	log.Info("compose said", "line", "password s3cr3t-pa55 rejected")
	// Output:
	// login failed for DB_PASSWORD="[REDACTED]"
	// level=INFO msg="compose said" line="password [REDACTED] rejected"
}

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
		{"in a struct %#v", func() string { return fmt.Sprintf("%#v", h) }, `secret_test.holder{Name:"n", Token:secret.Value("` + M + `")}`},
		{"in a map %v", func() string { return fmt.Sprint(map[string]secret.Value{"k": v}) }, "map[k:" + M + "]"},
		{"in a slice %v", func() string { return fmt.Sprint([]secret.Value{v}) }, "[" + M + "]"},
		{"json in a struct", func() string { return mustJSON(h) }, `{"Name":"n","Token":"` + M + `"}`},
		{"json as a map value", func() string { return mustJSON(map[string]secret.Value{"k": v}) }, `{"k":"` + M + `"}`},
		{"json as a map key", func() string { return mustJSON(map[secret.Value]int{v: 1}) }, `{"` + M + `":1}`},
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
