//go:build !fakedocker_cli

package fakedocker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// engine is the fake docker Engine API (package doc, "The Engine API"; endpoints): an
// http.Handler over the same state file and script as the fake docker program. Errors
// are {"message": "..."} with the engine's status codes; an unknown path is 404 and a
// known path with another method 405, so that a wrong request shows up.
type engine struct {
	cfg config

	mu       sync.Mutex
	cached   Script      // the script as last read (script)
	cachedFI os.FileInfo // the info of its file then
}

// newEngine returns the fake engine over the record, state and script of cfg (State ""
// means Log + ".state"). Without Log and State nothing is kept and no project is up.
func newEngine(cfg config) *engine {
	return &engine{cfg: cfg.withEnv(nil)}
}

// engineServer is a fake engine served on a unix socket.
type engineServer struct {
	// Socket is the path of the unix socket.
	Socket string

	srv  *http.Server
	done chan error
}

// serveEngine serves newEngine(cfg) on a new unix socket at socketPath (at most 107
// bytes: sun_path is 108 with its NUL). Close stops it and removes the socket.
func serveEngine(socketPath string, cfg config) (*engineServer, error) {
	if len(socketPath) > 107 {
		return nil, fmt.Errorf("fake engine: socket path %s is %d bytes, more than the 107 a unix socket allows", socketPath, len(socketPath))
	}
	ln, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("fake engine: %w", err)
	}
	s := &engineServer{
		Socket: socketPath,
		srv:    &http.Server{Handler: newEngine(cfg), ReadHeaderTimeout: 10 * time.Second},
		done:   make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server, closing its connections, and removes the socket.
func (s *engineServer) Close() error {
	err := s.srv.Close()
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = cmp.Or(err, serveErr)
	}
	if rmErr := os.Remove(s.Socket); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = cmp.Or(err, rmErr)
	}
	return err
}

// HTTPClient returns a client whose every request goes to the fake Engine API's
// socket, whatever the URL's host ("http://docker/containers/json").
func (d *Docker) HTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.Socket)
	}}}
}

// versionPrefix is the optional /v1.NN of a versioned path.
var versionPrefix = regexp.MustCompile(`^/v[0-9]+\.[0-9]+(/.*)$`)

// apiError is an error answer of the engine.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP records the request and answers it.
func (e *engine) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Path
	if e.cfg.Log != "" {
		c := Call{Argv: []string{EngineArgv0, req.Method, path}, Query: req.URL.RawQuery, Time: time.Now().UTC()}
		if err := appendCall(e.cfg.Log, c); err != nil {
			e.reply(w, nil, errorf(http.StatusInternalServerError, "fake engine: recording the call in %s: %v", e.cfg.Log, err))
			return
		}
	}
	if m := versionPrefix.FindStringSubmatch(path); m != nil {
		path = m[1]
	}
	body, err := e.route(req, path)
	e.reply(w, body, err)
}

// reply writes body (a string is text/plain, anything else JSON) or the error.
func (e *engine) reply(w http.ResponseWriter, body any, err error) {
	h := w.Header()
	h.Set("Api-Version", apiVersion)
	h.Set("Docker-Experimental", "false")
	h.Set("Ostype", "linux")
	h.Set("Server", "Docker/"+e.serverVersion()+" (linux)")
	code := http.StatusOK
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = errorf(http.StatusInternalServerError, "fake engine: %v", err)
		}
		code, body = ae.code, map[string]string{"message": ae.msg}
	}
	if s, ok := body.(string); ok {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = fmt.Fprint(w, s)
		return
	}
	b, mErr := json.Marshal(body)
	if mErr != nil {
		code, b = http.StatusInternalServerError, fmt.Appendf(nil, `{"message":%q}`, mErr.Error())
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// serverVersion is the script's server version, or the default when there is no
// readable script.
func (e *engine) serverVersion() string {
	if s, err := e.script(); err == nil && s.ServerVersion != "" {
		return s.ServerVersion
	}
	return DefaultServerVersion
}

// script reads the script file, the zero Script while there is none. It is parsed
// again only when the file changed: another file (a rename), or another size or
// modification time.
func (e *engine) script() (Script, error) {
	if e.cfg.Script == "" {
		return Script{}, nil
	}
	fi, err := os.Stat(e.cfg.Script)
	if errors.Is(err, fs.ErrNotExist) {
		return Script{}, nil // read once a test puts it in place
	}
	if err != nil {
		return Script{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.cachedFI; c != nil && os.SameFile(c, fi) && fi.Size() == c.Size() && fi.ModTime().Equal(c.ModTime()) {
		return e.cached, nil
	}
	s, err := readScript(e.cfg.Script)
	if err != nil {
		return Script{}, err
	}
	e.cached, e.cachedFI = *s, fi
	return *s, nil
}

// endpoint is one path the fake engine serves: its path.Match pattern (a "*" is the
// third segment, not empty, handed to serve as arg), the methods it takes, and the
// docker CLI command that reads the same ("" none; see readCommand).
type endpoint struct {
	pattern string
	methods []string
	command string
	serve   func(e *engine, req *http.Request, arg string) (any, error)
}

var endpoints = []endpoint{
	{"/_ping", []string{http.MethodGet, http.MethodHead}, "", func(*engine, *http.Request, string) (any, error) { return "OK", nil }},
	{"/version", []string{http.MethodGet}, "version", func(e *engine, _ *http.Request, _ string) (any, error) { return e.version() }},
	{"/info", []string{http.MethodGet}, "", func(e *engine, _ *http.Request, _ string) (any, error) { return e.info() }},
	{"/containers/json", []string{http.MethodGet}, "ps", func(e *engine, req *http.Request, _ string) (any, error) { return e.listContainers(req) }},
	{"/containers/*/json", []string{http.MethodGet}, "inspect", func(e *engine, _ *http.Request, id string) (any, error) { return e.inspectContainer(id) }},
	{"/images/json", []string{http.MethodGet}, "", func(e *engine, req *http.Request, _ string) (any, error) { return e.listImages(req) }},
	{"/images/*", []string{http.MethodDelete}, "", (*engine).removeImage},
}

// endpointOf is the endpoint p (no version prefix) is of, with the segment its "*"
// matched.
func endpointOf(p string) (endpoint, string, bool) {
	for _, ep := range endpoints {
		if ok, _ := path.Match(ep.pattern, p); !ok {
			continue
		}
		if !strings.Contains(ep.pattern, "*") {
			return ep, "", true
		}
		if arg := strings.Split(p, "/")[2]; arg != "" {
			return ep, arg, true
		}
	}
	return endpoint{}, "", false
}

// route answers one request (path without its version prefix), playing the script's
// command first for a read the CLI also does (playScripted).
func (e *engine) route(req *http.Request, path string) (any, error) {
	ep, arg, ok := endpointOf(path)
	if !ok {
		return nil, errorf(http.StatusNotFound, "page not found (the fake engine serves /_ping, /version, /info, /containers/json, /containers/{id}/json, /images/json and /images/{id})")
	}
	if !slices.Contains(ep.methods, req.Method) {
		return nil, errorf(http.StatusMethodNotAllowed, "fake engine: method %s not allowed for %s (allowed: %s)", req.Method, path, strings.Join(ep.methods, ", "))
	}
	if ep.command != "" {
		if err := e.playScripted(ep.command); err != nil {
			return nil, err
		}
	}
	return ep.serve(e, req, arg)
}

// EngineCommand is, for a request to the Engine API, the docker command that reads
// the same and whose script plays for it too: "version" for GET /version, "ps" for
// /containers/json, "inspect" for /containers/{id}/json; "" for another request and
// for a run of the program.
func (c Call) EngineCommand() string {
	if len(c.Argv) != 3 || c.Argv[0] != EngineArgv0 {
		return ""
	}
	return readCommand(c.Argv[2])
}

// readCommand is the docker CLI command that reads what the Engine API path reads
// (Call.EngineCommand), "" for none.
func readCommand(path string) string {
	ep, _, _ := endpointOf(path)
	return ep.command
}

// playScripted plays the script's command name (readCommand) as the docker program
// plays it: its delay, then its failures, as a 500 with the command's stderr.
func (e *engine) playScripted(name string) error {
	s, err := e.script()
	if err != nil {
		return errorf(http.StatusInternalServerError, "fake engine: %v", err)
	}
	cmd, ok := s.Commands[name]
	if !ok {
		return nil
	}
	if cmd.Delay > 0 {
		time.Sleep(cmd.Delay)
	}
	fail := false
	if err := e.state(true, func(_ *run, st *fakeState) error { fail = countCall(st, name, cmd); return nil }); err != nil {
		return err
	}
	if !fail {
		return nil
	}
	return errorf(http.StatusInternalServerError, "%s", cmp.Or(strings.TrimSpace(cmd.Stderr), "fake engine: scripted failure of "+name))
}

// state runs fn under the lock of the fake docker program's state with a run that
// knows the script, and saves the state when save is true (false: a read).
func (e *engine) state(save bool, fn func(r *run, st *fakeState) error) error {
	s, err := e.script()
	if err != nil {
		return errorf(http.StatusInternalServerError, "fake engine: %v", err)
	}
	r := &run{statePath: e.cfg.State, script: s}
	return lockedStatus(r.statePath, func() fakeState { return fakeState{} }, save, func(st *fakeState) error { return fn(r, st) })
}

func (e *engine) version() (any, error) {
	v := e.serverVersion()
	details := map[string]string{
		"ApiVersion": apiVersion, "Arch": "amd64", "BuildTime": "2024-09-20T11:41:10.000000000+00:00",
		"Experimental": "false", "GitCommit": "41ca978", "GoVersion": "go1.22.7",
		"KernelVersion": "6.1.0", "MinAPIVersion": "1.24", "Os": "linux",
	}
	out := map[string]any{
		"Platform":   map[string]string{"Name": "Docker Engine - Community (fake)"},
		"Components": []any{map[string]any{"Name": "Engine", "Version": v, "Details": details}},
		"Version":    v,
	}
	for k, d := range details { // the top level repeats every detail but Experimental
		if k != "Experimental" {
			out[k] = d
		}
	}
	return out, nil
}

// truthy reads a boolean query parameter as the engine does: 1 or true.
func truthy(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// parseFilters reads the filters parameter: {"key":["v",...]} or the older
// {"key":{"v":true}}.
func parseFilters(raw string) (map[string][]string, error) {
	if raw == "" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid filter: %v", err)
	}
	out := map[string][]string{}
	for k, v := range m {
		var list []string
		if err := json.Unmarshal(v, &list); err == nil {
			out[k] = list
			continue
		}
		var set map[string]bool
		if err := json.Unmarshal(v, &set); err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid filter %q: want a list of strings", k)
		}
		for s, on := range set {
			if on {
				out[k] = append(out[k], s)
			}
		}
	}
	return out, nil
}

// matchLabels reports whether labels satisfy every label filter ("k" or "k=v").
func matchLabels(labels map[string]string, filters []string) bool {
	for _, f := range filters {
		k, v, hasV := strings.Cut(f, "=")
		got, ok := labels[k]
		if !ok || (hasV && got != v) {
			return false
		}
	}
	return true
}

// containerSummary is one item of GET /containers/json, with the engine's keys.
type containerSummary struct {
	ID         string            `json:"Id"`
	Names      []string          `json:"Names"`
	Image      string            `json:"Image"`
	ImageID    string            `json:"ImageID"`
	Command    string            `json:"Command"`
	Created    int64             `json:"Created"`
	Ports      []any             `json:"Ports"`
	Labels     map[string]string `json:"Labels"`
	State      string            `json:"State"`
	Status     string            `json:"Status"`
	HostConfig map[string]string `json:"HostConfig"`
	Mounts     []any             `json:"Mounts"`
}

// listContainers is one ps step: the containers in the state of the next ps call,
// filtered by label and status; without all only running ones, as the engine does.
func (e *engine) listContainers(req *http.Request) (any, error) {
	q := req.URL.Query()
	filters, err := parseFilters(q.Get("filters"))
	if err != nil {
		return nil, err
	}
	for k := range filters {
		if k != "label" && k != "status" {
			return nil, errorf(http.StatusBadRequest, "fake engine: filter %q is not modelled (the fake filters by label and status)", k)
		}
	}
	all := truthy(q.Get("all"))
	list := []containerSummary{}
	err = e.state(true, func(r *run, st *fakeState) error {
		n := st.PSCalls
		st.PSCalls++
		for _, c := range r.containers(st) {
			r.stepTo(st, &c, n)
			labels := c.labels(st)
			if !all && !c.running() {
				continue
			}
			if !matchLabels(labels, filters["label"]) {
				continue
			}
			if fs := filters["status"]; len(fs) > 0 && !slices.Contains(fs, c.stateName()) {
				continue
			}
			list = append(list, containerSummary{
				ID: c.id(st), Names: []string{"/" + c.name}, Image: c.image, ImageID: ImageID(c.image),
				Command: containerCommand, Created: st.UpAt - 1, Ports: []any{}, Labels: labels,
				State: c.stateName(), Status: c.status(n),
				HostConfig: map[string]string{"NetworkMode": st.Project + "_default"}, Mounts: []any{},
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

// inspectContainer is docker inspect's object of one container: the same as the fake
// docker program prints, in the state of the last ps step.
func (e *engine) inspectContainer(want string) (any, error) {
	var obj map[string]any
	err := e.state(false, func(r *run, st *fakeState) error {
		c, ok := findContainer(r, st, want)
		if !ok {
			return errorf(http.StatusNotFound, "No such container: %s", want)
		}
		obj = c.inspectJSON(st)
		return nil
	})
	return obj, err
}

// imageSummary is one item of GET /images/json, with the engine's keys.
type imageSummary struct {
	Containers  int               `json:"Containers"`
	Created     int64             `json:"Created"`
	ID          string            `json:"Id"`
	Labels      map[string]string `json:"Labels"`
	ParentID    string            `json:"ParentId"`
	RepoDigests []string          `json:"RepoDigests"`
	RepoTags    []string          `json:"RepoTags"`
	SharedSize  int64             `json:"SharedSize"`
	Size        int64             `json:"Size"`
	VirtualSize int64             `json:"VirtualSize"`
}

// listImages lists the images the fake holds, newest first as the engine does.
func (e *engine) listImages(req *http.Request) (any, error) {
	filters, err := parseFilters(req.URL.Query().Get("filters"))
	if err != nil {
		return nil, err
	}
	if len(filters) > 0 {
		return nil, errorf(http.StatusBadRequest, "fake engine: image filters are not modelled")
	}
	list := []imageSummary{}
	err = e.state(false, func(_ *run, st *fakeState) error {
		for _, im := range st.Images {
			list = append(list, imageSummary{
				Containers: -1, Created: im.Created, ID: im.ID, Labels: map[string]string{},
				RepoTags: []string{im.Ref}, SharedSize: -1, Size: im.Size, VirtualSize: im.Size,
			})
		}
		return nil
	})
	slices.SortStableFunc(list, func(a, b imageSummary) int { return cmp.Compare(b.Created, a.Created) })
	return list, err
}

// imageIDPattern is what DELETE /images/{id} accepts: a full ID or an ID prefix of at
// least 12 hex characters, with or without "sha256:".
var imageIDPattern = regexp.MustCompile(`^(sha256:)?[0-9a-f]{12,64}$`)

// removeImage removes an image by ID: 409 while a container of the project uses it (a
// stopped one only without force, as the engine does), 404 for an unknown ID.
func (e *engine) removeImage(req *http.Request, want string) (any, error) {
	if !imageIDPattern.MatchString(want) {
		return nil, errorf(http.StatusBadRequest, "fake engine: images are removed by ID (sha256:<hex>), not by reference: %q", want)
	}
	force := truthy(req.URL.Query().Get("force"))
	prefix := "sha256:" + strings.TrimPrefix(want, "sha256:")
	var out []map[string]string
	err := e.state(true, func(r *run, st *fakeState) error {
		i := slices.IndexFunc(st.Images, func(im heldImage) bool { return strings.HasPrefix(im.ID, prefix) })
		if i < 0 {
			return errorf(http.StatusNotFound, "No such image: %s", want)
		}
		im := st.Images[i]
		short := strings.TrimPrefix(im.ID, "sha256:")[:12]
		for _, c := range r.containers(st) {
			if ImageID(c.image) != im.ID {
				continue
			}
			r.stepTo(st, &c, max(st.PSCalls-1, 0))
			if c.running() {
				return errorf(http.StatusConflict, "conflict: unable to delete %s (cannot be forced) - image is being used by running container %s", short, c.id(st)[:12])
			}
			if !force {
				return errorf(http.StatusConflict, "conflict: unable to delete %s (must be forced) - image is being used by stopped container %s", short, c.id(st)[:12])
			}
		}
		st.Images = slices.Delete(st.Images, i, i+1)
		out = []map[string]string{{"Untagged": im.Ref}, {"Deleted": im.ID}}
		return nil
	})
	return out, err
}

// info is GET /info: the daemon's data root only (the script's docker_root_dir, else
// the directory of the state file, else the system's temporary directory).
func (e *engine) info() (any, error) {
	s, err := e.script()
	if err != nil {
		return nil, err
	}
	root := cmp.Or(s.DockerRootDir, os.TempDir())
	if s.DockerRootDir == "" && e.cfg.State != "" {
		root = filepath.Dir(e.cfg.State)
	}
	return map[string]any{"DockerRootDir": root, "ServerVersion": cmp.Or(s.ServerVersion, DefaultServerVersion)}, nil
}
