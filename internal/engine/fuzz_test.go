package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/monky/monky-deployd/deployd/compose"
)

// FuzzContainers decodes arbitrary container lists: never a panic, only compose's
// words for health, an exit code only of an exited container, and an error that never
// quotes a string of the input.
func FuzzContainers(f *testing.F) {
	f.Add(readTestdata(f, "containers.json"))
	f.Add([]byte(`[{"Id":"a","Names":["/x/y","/p-a-1"],"State":"running","Status":"Up 1 second","Health":{"Status":"healthy"}}]`))
	f.Add([]byte(`[{"Id":"b","State":"exited","Status":"Exited (-1) 3 weeks ago","Labels":{"k":"secret-value"}}]`))
	f.Add([]byte(`[{"Id":"c","State":"running","Status":"Up (health: starting)","Ports":[{"PrivatePort":2,"Type":"udp"},{"PrivatePort":1}]}]`))
	f.Add([]byte(`[{"Id":"secret-value","Labels":{"k":"secret-value"}},{"Id":"secret-value`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cs, err := decodeContainers(body)
		if err != nil {
			if strings.Contains(err.Error(), "secret-value") {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		for _, c := range cs {
			switch c.Health {
			case "", "starting", "healthy", "unhealthy":
			default:
				t.Fatalf("health %q", c.Health)
			}
			if c.Health != "" && c.State != "running" {
				t.Fatalf("health %q of a %q container", c.Health, c.State)
			}
			if c.ExitCode != 0 && c.State != "exited" {
				t.Fatalf("exit code %d of a %q container", c.ExitCode, c.State)
			}
			if c.State != strings.ToLower(c.State) || c.Name == "" && c.ID != "" {
				t.Fatalf("state %q, name %q of container %q", c.State, c.Name, c.ID)
			}
			for i := 1; i < len(c.Publishers); i++ {
				if c.Publishers[i-1].TargetPort > c.Publishers[i].TargetPort {
					t.Fatalf("publishers not sorted: %+v", c.Publishers)
				}
			}
		}
	})
}

// FuzzStatus reads docker's status texts: the health suffix and the exit code.
func FuzzStatus(f *testing.F) {
	for _, s := range []string{
		"Up 3 minutes (healthy)", "Up 1 second (unhealthy)", "Up Less than a second (health: starting)",
		"Exited (3) 2 minutes ago", "Exited (-1) 1 hour ago", "Restarting (1) Less than a second ago",
		"Up 2 hours (Paused)", "Created", "Dead", "Removal In Progress", "",
	} {
		f.Add(s, 0)
	}
	f.Add("Exited", 255)
	f.Fuzz(func(t *testing.T, status string, code int) {
		// A health is one of compose's words, read from the suffix docker writes for it.
		h := healthFromStatus(status)
		suffix, ok := map[string]string{"": "", "healthy": "(healthy)", "unhealthy": "(unhealthy)", "starting": "(health: starting)"}[h]
		if !ok || !strings.HasSuffix(status, suffix) {
			t.Fatalf("health %q from %q", h, status)
		}
		for _, suffix := range []string{"healthy", "unhealthy", "health: starting"} {
			want := strings.TrimPrefix(suffix, "health: ")
			if got := healthFromStatus("Up " + status + " (" + suffix + ")"); got != want {
				t.Fatalf("healthFromStatus(Up %s (%s)) = %q", status, suffix, got)
			}
		}
		if n := compose.ExitCodeFromStatus(status); n != 0 && !strings.HasPrefix(status, "Exited (") {
			t.Fatalf("exit code %d from %q", n, status)
		}
		if got := compose.ExitCodeFromStatus("Exited (" + strconv.Itoa(code) + ")" + status); got != code {
			t.Fatalf("ExitCodeFromStatus(Exited (%d)%s) = %d", code, status, got)
		}
	})
}

// BenchmarkContainers lists the recorded project through the unix-socket fake: one
// request over a kept-alive connection and its decoding.
func BenchmarkContainers(b *testing.B) {
	f := newFakeEngine(b, nil)
	c := f.client(b, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		cs, err := c.Containers(ctx, recProject)
		if err != nil || len(cs) != 6 {
			b.Fatalf("%d containers, %v", len(cs), err)
		}
	}
}
