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

// TestAssert: a match passes; a mismatch fails with a diff naming the file and
// -update, and goes on, leaving the file as it was; a missing file stops the test;
// -update rewrites and creates the files; JSON compares whatever the spacing and key
// order.
func TestAssert(t *testing.T) {
	const lines = "line 1\nline 2\n"
	tests := []struct {
		name   string
		before map[string]string // the golden files under testdata
		update bool
		check  func(testing.TB)
		errors int
		fatal  bool
		msg    []string          // what the one error says
		after  map[string]string // the golden files then
	}{
		{name: "match passes", before: map[string]string{"sub/out.txt": lines},
			check: func(tb testing.TB) { Assert(tb, "sub/out.txt", []byte(lines)) }},
		{name: "mismatch fails", before: map[string]string{"out.txt": lines},
			check:  func(tb testing.TB) { Assert(tb, "out.txt", []byte("line 1\nline two\n")) },
			errors: 1, msg: []string{"-line 2", "+line two", filepath.Join("testdata", "out.txt"), "go test -update"},
			after: map[string]string{"out.txt": lines}},
		{name: "missing stops", check: func(tb testing.TB) {
			Assert(tb, "none.txt", []byte("x"))
			tb.Errorf("went on after a missing golden file")
		}, errors: 1, fatal: true, msg: []string{"go test -update"}},
		{name: "update rewrites", before: map[string]string{"out.txt": "old\n"}, update: true, check: func(tb testing.TB) {
			Assert(tb, "out.txt", []byte("new\n"))
			Assert(tb, "new/dir/created.txt", []byte("created\n"))
		}, after: map[string]string{"out.txt": "new\n", "new/dir/created.txt": "created\n"}},
		{name: "equal JSON passes", before: map[string]string{"out.json": "{\n  \"a\": 1,\n  \"b\": [1, 2]\n}\n"},
			check: func(tb testing.TB) { AssertJSON(tb, "out.json", []byte(`{"b":[1,2],"a":1}`)) }},
		{name: "different JSON fails", before: map[string]string{"out.json": "{\n  \"a\": 1,\n  \"b\": [1, 2]\n}\n"},
			check:  func(tb testing.TB) { AssertJSON(tb, "out.json", []byte(`{"b":[2,1],"a":1}`)) },
			errors: 1, msg: []string{"go test -update"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			for name, content := range tc.before {
				p := Path(name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.update {
				old := *update
				*update = true
				t.Cleanup(func() { *update = old })
				if !Update() {
					t.Fatal("Update is false under -update")
				}
			}
			r := run(tc.check)
			if len(r.errors) != tc.errors || r.fatal != tc.fatal {
				t.Fatalf("errors %q, fatal %v; want %d error(s), fatal %v", r.errors, r.fatal, tc.errors, tc.fatal)
			}
			for _, want := range tc.msg {
				if !strings.Contains(r.errors[0], want) {
					t.Errorf("the message lacks %q:\n%s", want, r.errors[0])
				}
			}
			for name, want := range tc.after {
				if data, err := os.ReadFile(Path(name)); err != nil || string(data) != want {
					t.Errorf("%s holds %q, %v; want %q", name, data, err, want)
				}
			}
		})
	}
}
