package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing the test. Its
// Fatalf and FailNow end the goroutine, as the testing package's do; run calls it in
// one of its own.
type recorder struct {
	testing.TB // nil: a method not overridden below panics
	errors     []string
	fatal      bool
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Failed() bool { return r.fatal || len(r.errors) > 0 }
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.FailNow()
}
func (r *recorder) Fatal(args ...any) {
	r.Error(args...)
	r.FailNow()
}
func (r *recorder) FailNow() {
	r.fatal = true
	runtime.Goexit()
}

// run calls f with a recorder in a goroutine of its own and returns the recorder.
func run(f func(testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// inTemp makes the test's working directory a temporary one whose testdata/<name>
// holds content.
func inTemp(t *testing.T, name, content string) {
	dir := t.TempDir()
	p := filepath.Join(dir, "testdata", filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
}

// withUpdate runs the test as under -update.
func withUpdate(t *testing.T) {
	old := *update
	*update = true
	t.Cleanup(func() { *update = old })
}

func TestAssertMatchPasses(t *testing.T) {
	inTemp(t, "sub/out.txt", "line 1\nline 2\n")
	r := run(func(tb testing.TB) { Assert(tb, "sub/out.txt", []byte("line 1\nline 2\n")) })
	if r.Failed() {
		t.Fatalf("a match failed: %q", r.errors)
	}
}

func TestAssertMismatchFails(t *testing.T) {
	inTemp(t, "out.txt", "line 1\nline 2\n")
	r := run(func(tb testing.TB) { Assert(tb, "out.txt", []byte("line 1\nline two\n")) })
	if len(r.errors) != 1 || r.fatal {
		t.Fatalf("a mismatch gave errors %q, fatal %v; want one error, the test going on", r.errors, r.fatal)
	}
	msg := r.errors[0]
	t.Logf("the message of a mismatch:\n%s", msg)
	for _, want := range []string{"-line 2", "+line two", filepath.Join("testdata", "out.txt"), "go test -update"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if data, _ := os.ReadFile(filepath.Join("testdata", "out.txt")); string(data) != "line 1\nline 2\n" {
		t.Errorf("a compare rewrote the file: %q", data)
	}
}

func TestAssertMissingStops(t *testing.T) {
	t.Chdir(t.TempDir())
	r := run(func(tb testing.TB) {
		Assert(tb, "none.txt", []byte("x"))
		tb.Errorf("went on after a missing golden file")
	})
	if !r.fatal || len(r.errors) != 1 {
		t.Fatalf("a missing file gave errors %q, fatal %v; want one fatal error", r.errors, r.fatal)
	}
	if !strings.Contains(r.errors[0], "go test -update") {
		t.Errorf("the message does not say how to create the file:\n%s", r.errors[0])
	}
}

func TestAssertUpdateRewrites(t *testing.T) {
	inTemp(t, "out.txt", "old\n")
	withUpdate(t)
	if !Update() {
		t.Fatal("Update is false under -update")
	}
	r := run(func(tb testing.TB) {
		Assert(tb, "out.txt", []byte("new\n"))
		Assert(tb, "new/dir/created.txt", []byte("created\n"))
	})
	if r.Failed() {
		t.Fatalf("an update failed: %q", r.errors)
	}
	for name, want := range map[string]string{"out.txt": "new\n", "new/dir/created.txt": "created\n"} {
		if data, err := os.ReadFile(Path(name)); err != nil || string(data) != want {
			t.Errorf("%s holds %q, %v; want %q", name, data, err, want)
		}
	}
}

func TestAssertJSON(t *testing.T) {
	inTemp(t, "out.json", "{\n  \"a\": 1,\n  \"b\": [1, 2]\n}\n")
	if r := run(func(tb testing.TB) { AssertJSON(tb, "out.json", []byte(`{"b":[1,2],"a":1}`)) }); r.Failed() {
		t.Errorf("equal JSON failed: %q", r.errors)
	}
	r := run(func(tb testing.TB) { AssertJSON(tb, "out.json", []byte(`{"b":[2,1],"a":1}`)) })
	if len(r.errors) != 1 || r.fatal {
		t.Fatalf("different JSON gave errors %q, fatal %v; want one error", r.errors, r.fatal)
	}
	if !strings.Contains(r.errors[0], "go test -update") {
		t.Errorf("the message does not say how to rewrite the file:\n%s", r.errors[0])
	}
}
