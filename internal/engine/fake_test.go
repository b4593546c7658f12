package engine

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The recording's facts (testdata/README.md), checked by the fake's own code.
const (
	recProject  = "engrec"
	recImageID  = "sha256:3b8ee9b643f9f0b85fe9c6ed301ff748f918a835d4888c8d1a110281d0adeb64"
	recCrashID  = "fdd672a127dd60871375e641d6d5598e36d2a31b0a239fd1c0ebcc31817a9492"
	recVersion  = "20.10.24+dfsg1"
	freeImageID = "sha256:542d1381bdfca5cc089c5355b8f80f8d4026b73696fadb3a8f2e9cb662349275"
)

// fakeEngine serves the golden answers recorded from a real engine on a unix socket.
type fakeEngine struct {
	srv    *httptest.Server
	sock   string
	mu     sync.Mutex
	paths  []string // every request as "METHOD path?query"
	closed int      // connections the server saw closed
}

// newFakeEngine starts the fake on a socket in a short temporary directory (sun_path
// holds 108 bytes); h, when not nil, answers instead of the golden files.
func newFakeEngine(tb testing.TB, h http.HandlerFunc) *fakeEngine {
	tb.Helper()
	dir, err := os.MkdirTemp("", "eng")
	noErr(tb, err)
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := &fakeEngine{sock: filepath.Join(dir, "d.sock")}
	l, err := net.Listen("unix", f.sock)
	noErr(tb, err)
	if h == nil {
		h = f.golden(tb)
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.Method+" "+r.URL.RequestURI())
		f.mu.Unlock()
		h(w, r)
	}))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			f.mu.Lock()
			f.closed++
			f.mu.Unlock()
		}
	}
	f.srv.Listener = l
	f.srv.Start()
	tb.Cleanup(f.srv.Close)
	return f
}

// client returns a Client of the fake, closed at the end of the test.
func (f *fakeEngine) client(tb testing.TB, opts Options) *Client {
	tb.Helper()
	c, err := New([]string{"DOCKER_HOST=unix://" + f.sock}, opts)
	noErr(tb, err)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func (f *fakeEngine) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	noErr(tb, err)
	return b
}

// golden answers like the daemon the files were recorded from.
func (f *fakeEngine) golden(tb testing.TB) http.HandlerFunc {
	containers := readTestdata(tb, "containers.json")
	images := readTestdata(tb, "images.json")
	version := readTestdata(tb, "version.json")
	notFoundContainer := readTestdata(tb, "error-404-container.json")
	notFoundImage := readTestdata(tb, "error-404-image.json")
	inUse := readTestdata(tb, "error-409-image.json")
	var list []map[string]any
	noErr(tb, json.Unmarshal(containers, &list))
	send := func(w http.ResponseWriter, status int, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case r.Method == http.MethodGet && p == "/containers/json":
			if r.URL.Query().Get("all") != "1" {
				send(w, 400, []byte(`{"message":"the fake serves all=1 only"}`))
				return
			}
			filter := r.URL.Query().Get("filters")
			if filter == "" {
				send(w, 200, containers)
				return
			}
			var args map[string]map[string]bool
			if err := json.Unmarshal([]byte(filter), &args); err != nil || len(args) != 1 || len(args["label"]) != 1 {
				send(w, 400, []byte(`{"message":"the fake wants one label filter"}`))
				return
			}
			if args["label"]["com.docker.compose.project="+recProject] {
				send(w, 200, containers)
			} else {
				send(w, 200, []byte("[]\n"))
			}
		case r.Method == http.MethodGet && strings.HasPrefix(p, "/containers/") && strings.HasSuffix(p, "/json"):
			id := strings.TrimSuffix(strings.TrimPrefix(p, "/containers/"), "/json")
			for _, c := range list {
				full, _ := c["Id"].(string)
				names, _ := c["Names"].([]any)
				if id == full || (len(names) > 0 && names[0] == "/"+id) {
					send(w, 200, readTestdata(tb, "inspect/"+full+".json"))
					return
				}
			}
			send(w, 404, notFoundContainer)
		case r.Method == http.MethodGet && p == "/version":
			send(w, 200, version)
		case r.Method == http.MethodGet && p == "/images/json":
			send(w, 200, images)
		case r.Method == http.MethodDelete && strings.HasPrefix(p, "/images/"):
			if r.URL.Query().Has("force") {
				send(w, 400, []byte(`{"message":"the fake never forces"}`))
				return
			}
			switch strings.TrimPrefix(p, "/images/") {
			case recImageID:
				send(w, 409, inUse)
			case freeImageID:
				send(w, 200, []byte(`[{"Untagged":"monky-systemd-box:5cb8bd664ce7f4c6"},{"Deleted":"`+freeImageID+`"}]`))
			default:
				send(w, 404, notFoundImage)
			}
		default:
			send(w, 404, []byte(`{"message":"page not found"}`))
		}
	}
}

// noErr fails the test at once when err is not nil.
func noErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
