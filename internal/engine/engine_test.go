package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd/compose"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// comparable is what Containers must agree on with compose.ParsePS.
type comparable struct {
	Name, Project, Service, State, Health, Image, Command string
	ExitCode                                              int
	Publishers                                            []compose.Publisher
}

func comparableOf(c compose.Container) comparable {
	return comparable{Name: c.Name, Project: c.Project, Service: c.Service, State: c.State, Health: c.Health,
		Image: c.Image, Command: c.Command, ExitCode: c.ExitCode, Publishers: slices.Clip(c.Publishers)}
}

// byName sorts containers by name, so that two listings compare.
func byName(cs []compose.Container) []compose.Container {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b compose.Container) int { return strings.Compare(a.Name, b.Name) })
	return cs
}

// sameAsPS fails unless got and the ps listing agree container by container.
func sameAsPS(t *testing.T, got, ps []compose.Container) {
	t.Helper()
	got, ps = byName(got), byName(ps)
	if len(got) != len(ps) {
		t.Fatalf("Containers gave %d containers, compose ps %d", len(got), len(ps))
	}
	for i := range got {
		g, w := comparableOf(got[i]), comparableOf(ps[i])
		if len(g.Publishers) == 0 && len(w.Publishers) == 0 {
			g.Publishers, w.Publishers = nil, nil
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("container %s:\n engine     %+v\n compose ps %+v", ps[i].Name, g, w)
		}
		if !strings.HasPrefix(got[i].ID, ps[i].ID) || len(got[i].ID) != 64 {
			t.Errorf("container %s: ID %q is not the full ID of compose's %q", ps[i].Name, got[i].ID, ps[i].ID)
		}
		for k, v := range got[i].Labels {
			if !strings.Contains(v, ",") && ps[i].Labels[k] != v {
				t.Errorf("container %s: label %s is %q, compose ps says %q", ps[i].Name, k, v, ps[i].Labels[k])
			}
		}
	}
}

func TestContainersGolden(t *testing.T) {
	f := newFakeEngine(t, nil)
	c := f.client(t, Options{})
	got, err := c.Containers(context.Background(), strings.ToUpper(recProject))
	noErr(t, err)
	ps, err := compose.ParsePS(readTestdata(t, "compose-ps.json"))
	noErr(t, err)
	sameAsPS(t, got, ps)

	// And what each recorded container is, independent of compose.
	want := map[string]struct {
		state, health string
		exit          int
	}{
		"engrec-web-1":     {"running", "healthy", 0},
		"engrec-sick-1":    {"running", "unhealthy", 0},
		"engrec-slow-1":    {"running", "starting", 0},
		"engrec-plain-1":   {"running", "", 0},
		"engrec-oneshot-1": {"exited", "", 3},
		"engrec-crash-1":   {"restarting", "", 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d containers, want %d", len(got), len(want))
	}
	for _, ctr := range got {
		w, ok := want[ctr.Name]
		if !ok {
			t.Fatalf("unexpected container %q", ctr.Name)
		}
		if ctr.State != w.state || ctr.Health != w.health || ctr.ExitCode != w.exit || ctr.Project != recProject {
			t.Errorf("%s: state %q health %q exit %d project %q; want %q %q %d %q", ctr.Name, ctr.State, ctr.Health, ctr.ExitCode, ctr.Project, w.state, w.health, w.exit, recProject)
		}
		if ctr.Name == "engrec-web-1" {
			pub := compose.Publisher{URL: "127.0.0.1", TargetPort: 8080, PublishedPort: 32768, Protocol: "tcp"}
			if len(ctr.Publishers) != 1 || ctr.Publishers[0] != pub {
				t.Errorf("web publishers %+v, want %+v", ctr.Publishers, pub)
			}
		}
	}

	// Another project has no containers; the request is unversioned and filtered.
	none, err := c.Containers(context.Background(), "other")
	if err != nil || none != nil {
		t.Fatalf("Containers(other) = %v, %v; want nil, nil", none, err)
	}
	for _, r := range f.requests() {
		if !strings.HasPrefix(r, "GET /containers/json?") || !strings.Contains(r, "all=1") || !strings.Contains(r, "filters=") {
			t.Errorf("request %q: want GET /containers/json?all=1&filters=…", r)
		}
	}
	if _, err := c.Containers(context.Background(), ""); err == nil {
		t.Fatal("Containers of an empty project name did not fail")
	}
}

func TestContainersHealthObject(t *testing.T) {
	// API 1.52 and later send a Health object; it wins over the status text. The
	// shape is the ContainerSummary of the Engine API reference (not recorded: the
	// engine here speaks 1.41).
	body := `[
	 {"Id":"a","Names":["/p-a-1"],"State":"running","Status":"Up 1 second (health: starting)","Health":{"Status":"healthy","FailingStreak":0},"Labels":{"com.docker.compose.service":"a"}},
	 {"Id":"b","Names":["/p-b-1"],"State":"running","Status":"Up 1 second","Health":{"Status":"none","FailingStreak":0}},
	 {"Id":"c","Names":["/p-c-1"],"State":"exited","Status":"Exited (137) 1 second ago","Health":{"Status":"none"}},
	 {"Id":"d","Names":["/p-d-1"],"State":"running","Status":"Up 1 second (unhealthy)","Health":{"Status":"unhealthy","FailingStreak":3},"NewField":{"x":[1]}},
	 {"Id":"e","Names":["/web/db","/p-e-1"],"State":"Running","Status":"Up 2 hours (healthy)"},
	 {"Id":"0123456789abcdef","State":"paused","Status":"Up 1 second (Paused)"},
	 {"Id":"g","Names":["/p-g-1"],"State":"dead","Status":"Dead"}
	]`
	cs, err := decodeContainers([]byte(body))
	noErr(t, err)
	want := []struct{ name, state, health, service string }{
		{"p-a-1", "running", "healthy", "a"},
		{"p-b-1", "running", "", ""},
		{"p-c-1", "exited", "", ""},
		{"p-d-1", "running", "unhealthy", ""},
		{"p-e-1", "running", "healthy", ""},
		{"0123456789ab", "paused", "", ""},
		{"p-g-1", "dead", "", ""},
	}
	for i, w := range want {
		g := cs[i]
		if g.Name != w.name || g.State != w.state || g.Health != w.health || g.Service != w.service {
			t.Errorf("container %d: %q %q %q %q, want %+v", i, g.Name, g.State, g.Health, g.Service, w)
		}
	}
	if cs[2].ExitCode != 137 {
		t.Errorf("exit code %d, want 137", cs[2].ExitCode)
	}
	for _, empty := range []string{"[]", "null", " [] \n"} {
		if cs, err := decodeContainers([]byte(empty)); err != nil || cs != nil {
			t.Errorf("%q: %v, %v; want nil, nil", empty, cs, err)
		}
	}
}

func TestInspectGolden(t *testing.T) {
	f := newFakeEngine(t, nil)
	c := f.client(t, Options{})
	ctx := context.Background()
	cs, err := c.Containers(ctx, recProject)
	noErr(t, err)
	var ids []string
	for _, ctr := range cs {
		ids = append(ids, ctr.ID)
	}
	ids = append(ids, "engrec-gone-1") // went away between list and inspect: 404
	ins, err := c.Inspect(ctx, ids)
	noErr(t, err)
	if len(ins) != len(cs) {
		t.Fatalf("Inspect gave %d containers, want %d (the gone one skipped)", len(ins), len(cs))
	}
	for i, in := range ins {
		if in.ID != cs[i].ID || in.Name != cs[i].Name || in.Service != cs[i].Service {
			t.Errorf("inspect %d: %s %s %s, want %s %s %s", i, in.ID, in.Name, in.Service, cs[i].ID, cs[i].Name, cs[i].Service)
		}
		switch in.Service {
		case "crash":
			if in.RestartCount != 7 || in.ExitCode != 1 || in.State != "restarting" {
				t.Errorf("crash: restarts %d exit %d state %s; want 7, 1, restarting", in.RestartCount, in.ExitCode, in.State)
			}
		case "sick":
			if in.Health != "unhealthy" || in.FailingStreak == 0 || len(in.HealthLog) == 0 || in.HealthLog[0].ExitCode != 1 {
				t.Errorf("sick: health %q streak %d log %+v", in.Health, in.FailingStreak, in.HealthLog)
			}
		case "oneshot":
			if in.ExitCode != 3 || in.State != "exited" {
				t.Errorf("oneshot: exit %d state %s", in.ExitCode, in.State)
			}
		}
	}
	// By name too, and the 404 is skipped without an error.
	ins, err = c.Inspect(ctx, []string{"engrec-web-1"})
	if err != nil || len(ins) != 1 || ins[0].Health != "healthy" {
		t.Fatalf("Inspect(engrec-web-1) = %+v, %v", ins, err)
	}
	if ins, err := c.Inspect(ctx, nil); err != nil || ins != nil {
		t.Fatalf("Inspect(nil) = %v, %v", ins, err)
	}
	for _, bad := range []string{"", "../images/json", "a?b"} {
		if _, err := c.Inspect(ctx, []string{bad}); err == nil {
			t.Errorf("Inspect(%q) did not fail", bad)
		}
	}
}

func TestVersionAndImages(t *testing.T) {
	f := newFakeEngine(t, nil)
	c := f.client(t, Options{})
	ctx := context.Background()
	v, err := c.Version(ctx)
	if err != nil || v != recVersion {
		t.Fatalf("Version() = %q, %v; want %q", v, err, recVersion)
	}
	ims, err := c.Images(ctx)
	noErr(t, err)
	if len(ims) != 2 || ims[0].ID != recImageID || !slices.Equal(ims[0].RepoTags, []string{"monky-engine-rec:1"}) || ims[0].Size != 2826925 {
		t.Fatalf("Images() = %+v", ims)
	}
	used, err := c.ImagesInUse(ctx)
	noErr(t, err)
	if len(used) != 1 || !used[recImageID] {
		t.Fatalf("ImagesInUse() = %v, want only %s", used, recImageID)
	}
	mine, err := c.ProjectImages(ctx, recProject)
	if err != nil || len(mine) != 1 || !mine[recImageID] {
		t.Fatalf("ProjectImages(%q) = %v, %v; want only %s", recProject, mine, err, recImageID)
	}
	if _, err := c.ProjectImages(ctx, ""); err == nil {
		t.Fatal("ProjectImages without a project name: no error")
	}
	for _, r := range f.requests() {
		if strings.HasPrefix(strings.Fields(r)[1], "/v1") {
			t.Errorf("request %q is versioned", r)
		}
	}
}

func TestImagesDropsNone(t *testing.T) {
	f := newFakeEngine(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`[{"Id":"sha256:aa","RepoTags":["<none>:<none>"],"Size":1},{"Id":"sha256:bb","RepoTags":null}]`))
	})
	ims, err := f.client(t, Options{}).Images(context.Background())
	noErr(t, err)
	if len(ims) != 2 || ims[0].RepoTags != nil || ims[1].RepoTags != nil || ims[0].Size != 1 {
		t.Fatalf("Images() = %+v, want two untagged images", ims)
	}
}

func TestRemoveImage(t *testing.T) {
	f := newFakeEngine(t, nil)
	c := f.client(t, Options{})
	ctx := context.Background()
	for _, bad := range []string{
		"monky-engine-rec:1", "monky-engine-rec", "3b8ee9b643f9", strings.TrimPrefix(recImageID, "sha256:"),
		strings.ToUpper(recImageID), recImageID + "0", recImageID[:70], "sha256:" + strings.Repeat("g", 64), "",
		recImageID + "?force=1", "../containers/x",
	} {
		err := c.RemoveImage(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), "refused") || errors.Is(err, ErrNotFound) {
			t.Errorf("RemoveImage(%q) = %v, want a refusal", bad, err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("refused removals sent %d requests", n)
	}
	err := c.RemoveImage(ctx, recImageID)
	var e *Error
	if !errors.Is(err, ErrInUse) || errors.Is(err, ErrNotFound) || !errors.As(err, &e) || e.Status != 409 {
		t.Fatalf("removing the image in use: %v, want ErrInUse", err)
	}
	if !strings.Contains(err.Error(), "image is being used by running container") || !strings.Contains(err.Error(), "/images/"+recImageID) {
		t.Errorf("error %q lacks the daemon's message or the path", err)
	}
	if err := c.RemoveImage(ctx, "sha256:"+strings.Repeat("0", 64)); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrInUse) {
		t.Fatalf("removing a missing image: %v, want ErrNotFound", err)
	}
	if err := c.RemoveImage(ctx, freeImageID); err != nil {
		t.Fatalf("removing an unused image: %v", err)
	}
	want := "DELETE /images/" + freeImageID
	if rs := f.requests(); rs[len(rs)-1] != want {
		t.Fatalf("last request %q, want %q", rs[len(rs)-1], want)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("unreachable", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "eng")
		noErr(t, err)
		defer func() { _ = os.RemoveAll(dir) }()
		c, err := New([]string{"DOCKER_HOST=unix://" + filepath.Join(dir, "none.sock")}, Options{})
		noErr(t, err)
		_, err = c.Containers(ctx, "p")
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "systemctl status docker") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("err = %v, want ErrUnreachable naming the socket and what to do", err)
		}
	})
	t.Run("daemon error", func(t *testing.T) {
		f := newFakeEngine(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(500)
			_, _ = w.Write([]byte("{\"message\":\"boom\\u0007 \\n" + strings.Repeat("x", 2000) + "\"}"))
		})
		_, err := f.client(t, Options{}).Version(ctx)
		var e *Error
		if !errors.As(err, &e) || e.Status != 500 || !strings.HasPrefix(e.Message, "boom") || len(e.Message) > maxMessage+4 {
			t.Fatalf("err = %#v", err)
		}
		if strings.ContainsAny(e.Message, "\a\n") || !strings.Contains(err.Error(), "journalctl -u docker") || errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %q", err)
		}
	})
	t.Run("body too large", func(t *testing.T) {
		f := newFakeEngine(t, nil)
		c := f.client(t, Options{MaxBody: 1000})
		_, err := c.Containers(ctx, recProject)
		if err == nil || !strings.Contains(err.Error(), "larger than 1000 bytes") {
			t.Fatalf("err = %v, want the body limit", err)
		}
		if _, err := c.Version(ctx); err != nil { // 794 bytes pass
			t.Fatalf("a body under the limit: %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		f := newFakeEngine(t, func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		start := time.Now()
		_, err := f.client(t, Options{Timeout: 100 * time.Millisecond}).Version(ctx)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Fatalf("err = %v after %s, want a timeout", err, time.Since(start))
		}
	})
	t.Run("no secret in decoding errors", func(t *testing.T) {
		bodies := []string{
			`[{"Id":"a","Labels":{"DB_PASSWORD":"hunter2"},"State":7}]`,
			`[{"Id":"a","Labels":{"DB_PASSWORD":"hunter2"}},{"Id":"hunter2`,
			`[{"Id":"a","Labels":{"DB_PASSWORD":hunter2}}]`,
			`[{"Id":"a","Labels":{"DB_PASSWORD":"x"},"Ports":[{"PrivatePort":"hunter2"}]}]`,
		}
		for _, b := range bodies {
			f := newFakeEngine(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(b)) })
			_, err := f.client(t, Options{}).Containers(ctx, "p")
			if err == nil || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("body %s: err = %v, want an error without the value", b, err)
			}
		}
		inspect := `{"Id":"a","Config":{"Env":["DB_PASSWORD=hunter2"],"Labels":{"k":"hunter2"}},"State":{"Status":"hunter2","ExitCode":"hunter2"}}`
		if _, err := decodeInspect([]byte(inspect)); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("inspect: err = %v, want an error without the value", err)
		}
	})
}

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Op: "remove image", Host: "unix:///s", Path: "/images/x", Status: http.StatusConflict, Message: "in use"},
			"docker engine remove image /images/x on unix:///s: HTTP 409: in use (the image stays; it is removed once no container uses it)"},
		{&Error{Op: "inspect", Path: "/x", Status: 500, Err: errors.New("EOF")}, "docker engine inspect /x: HTTP 500 (the daemon failed: see journalctl -u docker): EOF"},
		{&Error{Op: "version", Message: "dropped without a status", Err: ErrUnreachable},
			"docker engine version: docker engine unreachable: the docker daemon cannot be reached: is dockerd running? systemctl status docker"},
		// Degenerate: no Op (was "docker engine  /x: HTTP 404").
		{&Error{Path: "/x", Status: 404}, "docker engine /x: HTTP 404"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestConcurrency(t *testing.T) {
	f := newFakeEngine(t, nil)
	c := f.client(t, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Containers(ctx, recProject); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestClose(t *testing.T) {
	f := newFakeEngine(t, nil)
	c := f.client(t, Options{})
	ctx := context.Background()
	for range 3 { // one kept-alive connection
		if _, err := c.Version(ctx); err != nil {
			t.Fatal(err)
		}
	}
	closed := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.closed
	}
	time.Sleep(50 * time.Millisecond)
	if n := closed(); n != 0 {
		t.Fatalf("%d connections closed before Close", n)
	}
	noErr(t, c.Close())
	for deadline := time.Now().Add(5 * time.Second); closed() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Close left the idle connection open")
		}
	}
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("a call after Close: %v", err)
	}
}

// TestNoDockerModule keeps the package's promise: no docker client module.
func TestNoDockerModule(t *testing.T) {
	for _, s := range testprog.NonStdDeps(t, ".") {
		if !strings.HasPrefix(s, "github.com/monky/monky-deployd/") {
			t.Errorf("internal/engine depends on %s; it speaks the Engine API with the standard library only", s)
		}
	}
}
