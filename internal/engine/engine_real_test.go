package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestMain removes the test app TestAgainstTheEngine built.
func TestMain(m *testing.M) { os.Exit(testprog.Run(m)) }

// realHint is how to run TestAgainstTheEngine.
const realHint = "MONKY_ENGINE=1 go test -race -run TestAgainstTheEngine ./internal/engine/ (needs a docker engine on /var/run/docker.sock and docker compose v2)"

// TestAgainstTheEngine runs the client against the real engine: a compose project
// with a healthy service, a one-shot that exits 3 and a crash-looping service with
// restart: always, compared with what `docker compose ps` and the docker CLI say.
func TestAgainstTheEngine(t *testing.T) {
	testprog.SkipIfShort(t)
	if os.Getenv("MONKY_ENGINE") != "1" {
		t.Skip("the real-engine test is off; run it with: " + realHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	suffix := strings.ToLower(rand.Text()[:8])
	project := "monky-engt-" + suffix
	tag := "monky-engine-client-test:" + suffix
	imageID := importTestImage(t, tag)
	dir := t.TempDir()
	composeFile := filepath.Join(dir, "compose.yaml")
	noErr(t, os.WriteFile(composeFile, []byte(strings.ReplaceAll(`services:
  web:
    image: {{image}}
    command: ["serve"]
    environment:
      SERVICE: web
    ports:
      - "127.0.0.1::8080"
    healthcheck:
      test: ["CMD", "/app", "health"]
      interval: 500ms
      timeout: 5s
      retries: 2
  oneshot:
    image: {{image}}
    command: ["exit", "3"]
  crash:
    image: {{image}}
    command: ["exit", "1"]
    restart: always
`, "{{image}}", tag)), 0o644))
	dc := func(args ...string) []byte {
		t.Helper()
		out, err := exec.CommandContext(ctx, "docker", append([]string{"compose", "-p", project, "-f", composeFile}, args...)...).Output()
		if err != nil {
			t.Fatalf("docker compose %s: %v: %s", strings.Join(args, " "), err, stderrOf(err))
		}
		return out
	}
	t.Cleanup(func() {
		_ = exec.Command("docker", "compose", "-p", project, "-f", composeFile, "down", "-v", "--remove-orphans", "-t", "1").Run()
		_ = exec.Command("docker", "image", "rm", "-f", tag).Run()
	})
	dc("up", "-d", "--quiet-pull")

	c, err := New(nil, Options{})
	noErr(t, err)
	defer func() { _ = c.Close() }()

	// Wait until web is healthy, oneshot exited and crash restarted at least once.
	deadline := time.Now().Add(90 * time.Second)
	for {
		cs, err := c.Containers(ctx, project)
		noErr(t, err)
		var ids []string
		ready := map[string]bool{}
		for _, ctr := range cs {
			ids = append(ids, ctr.ID)
			ready[ctr.Service] = ctr.Service == "web" && ctr.Health == "healthy" || ctr.Service == "oneshot" && ctr.State == "exited"
		}
		ins, err := c.Inspect(ctx, ids)
		noErr(t, err)
		for _, in := range ins {
			if in.Service == "crash" {
				ready["crash"] = in.RestartCount > 0
			}
		}
		if ready["web"] && ready["oneshot"] && ready["crash"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the project did not settle: %+v / %+v", cs, ins)
		}
		time.Sleep(300 * time.Millisecond)
	}

	t.Run("Containers equals compose ps", func(t *testing.T) {
		// The crash loop moves between restarting and running: compare a ps taken
		// between two equal engine listings.
		for attempt := 1; ; attempt++ {
			before, err := c.Containers(ctx, project)
			noErr(t, err)
			ps, err := compose.ParsePS(dc("ps", "--all", "--format", "json"))
			noErr(t, err)
			after, err := c.Containers(ctx, project)
			noErr(t, err)
			// A crash loop can go restarting and back between two equal listings, so
			// ps must agree with both too; a mismatch that lasts (a real one) still
			// fails after 20 attempts, and then sameAsPS says where.
			if !sameStates(before, after) || !sameStates(after, ps) {
				if attempt == 20 {
					sameAsPS(t, after, ps)
					t.Fatal("the containers never held still for a comparison")
				}
				continue
			}
			sameAsPS(t, after, ps)
			if len(after) != 3 {
				t.Fatalf("%d containers, want 3", len(after))
			}
			for _, ctr := range after {
				if ctr.Project != project || ctr.Service == "oneshot" && ctr.ExitCode != 3 || ctr.Service == "web" && ctr.Health != "healthy" {
					t.Errorf("%+v", ctr)
				}
			}
			return
		}
	})

	t.Run("Inspect", func(t *testing.T) {
		cs, err := c.Containers(ctx, project)
		noErr(t, err)
		ids := []string{project + "-gone-1"}
		for _, ctr := range cs {
			ids = append(ids, ctr.ID)
		}
		ins, err := c.Inspect(ctx, ids)
		noErr(t, err)
		if len(ins) != 3 {
			t.Fatalf("Inspect gave %d containers, want 3 (the missing one skipped)", len(ins))
		}
		for _, in := range ins {
			switch in.Service {
			case "crash":
				if in.RestartCount == 0 {
					t.Errorf("crash: RestartCount 0")
				}
			case "oneshot":
				if in.State != "exited" || in.ExitCode != 3 {
					t.Errorf("oneshot: %s %d", in.State, in.ExitCode)
				}
			case "web":
				if in.Health != "healthy" || len(in.HealthLog) == 0 {
					t.Errorf("web: %q %+v", in.Health, in.HealthLog)
				}
			}
		}
	})

	t.Run("Version", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").Output()
		if err != nil {
			t.Fatalf("docker version: %v: %s", err, stderrOf(err))
		}
		v, err := c.Version(ctx)
		if err != nil || v != strings.TrimSpace(string(out)) {
			t.Fatalf("Version() = %q, %v; docker version says %q", v, err, out)
		}
	})

	t.Run("images", func(t *testing.T) {
		ims, err := c.Images(ctx)
		noErr(t, err)
		if !hasImage(ims, imageID, tag) {
			t.Fatalf("Images() lacks %s (%s): %+v", imageID, tag, ims)
		}
		used, err := c.ImagesInUse(ctx)
		if err != nil || !used[imageID] {
			t.Fatalf("ImagesInUse() = %v, %v; want %s in it", used, err, imageID)
		}
		if err := c.RemoveImage(ctx, imageID); !errors.Is(err, ErrInUse) {
			t.Fatalf("removing the image in use: %v, want ErrInUse", err)
		}
		if err := c.RemoveImage(ctx, tag); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("removing by name: %v, want a refusal", err)
		}
		dc("down", "-t", "1")
		used, err = c.ImagesInUse(ctx)
		if err != nil || used[imageID] {
			t.Fatalf("after down, ImagesInUse() = %v, %v; want %s not in it", used, err, imageID)
		}
		if err := c.RemoveImage(ctx, imageID); err != nil {
			t.Fatalf("removing the unused image: %v", err)
		}
		ims, err = c.Images(ctx)
		if err != nil || hasImage(ims, imageID, "") {
			t.Fatalf("after the removal, Images() = %+v, %v", ims, err)
		}
		if err := c.RemoveImage(ctx, imageID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("removing it again: %v, want ErrNotFound", err)
		}
	})
}

// sameStates reports whether two listings agree on what sameAsPS compares.
func sameStates(a, b []compose.Container) bool {
	a, b = byName(a), byName(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if fmt.Sprint(comparableOf(a[i])) != fmt.Sprint(comparableOf(b[i])) {
			return false
		}
	}
	return true
}

func hasImage(ims []Image, id, tag string) bool {
	for _, im := range ims {
		if im.ID == id && (tag == "" || strings.Contains(strings.Join(im.RepoTags, " "), tag)) {
			return true
		}
	}
	return false
}

// importTestImage builds the static test app (test/engine/testapp) and imports it as
// tag, with /app as entrypoint and a world-writable /tmp; it returns the image ID.
func importTestImage(t *testing.T, tag string) string {
	t.Helper()
	app, err := os.ReadFile(testprog.Build(t, "github.com/monky/monky-deployd/test/engine/testapp", "-trimpath"))
	noErr(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: "app", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(app))},
	} {
		noErr(t, tw.WriteHeader(h))
	}
	_, err = tw.Write(app)
	noErr(t, err)
	noErr(t, tw.Close())
	imp := exec.Command("docker", "import", "-c", `ENTRYPOINT ["/app"]`, "-c", "LABEL monky.test=engine", "-", tag)
	imp.Stdin = &buf
	out, err := imp.Output()
	if err != nil {
		t.Fatalf("docker import: %v: %s", err, stderrOf(err))
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", tag).Run() })
	id := strings.TrimSpace(string(out))
	if !imageID.MatchString(id) {
		t.Fatalf("docker import printed %q, not an image ID", id)
	}
	return id
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
