package compose_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

func ExampleParsePS() {
	// compose 2.21 and later: one object per line
	lines := []byte(`{"ID":"8f6c2d1e4b3a","Name":"monky-web-1","Service":"web","State":"running","Health":"healthy","Status":"Up 2 minutes (healthy)","ExitCode":0,"Labels":"com.docker.compose.service=web"}
{"ID":"c0ffee00c0ff","Name":"monky-migrate-1","Service":"migrate","State":"exited","Health":"","Status":"Exited (0) 2 minutes ago","ExitCode":0}
`)
	// compose 2.20 and earlier: one array
	array := []byte(`[{"ID":"8f6c2d1e4b3a59708e1f","Name":"monky-web-1","Service":"web","State":"running","Health":"healthy","Status":"Up 2 minutes (healthy)","ExitCode":0,"Publishers":null}]`)
	for _, out := range [][]byte{lines, array, nil} {
		cs, err := compose.ParsePS(out)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(len(cs), "containers")
		for _, c := range cs {
			fmt.Printf("  %s: %s %s exit %d\n", c.Service, c.State, c.Health, c.ExitCode)
		}
	}
	// Output:
	// 2 containers
	//   web: running healthy exit 0
	//   migrate: exited  exit 0
	// 1 containers
	//   web: running healthy exit 0
	// 0 containers
}

func ExampleParseInspect() {
	// What docker inspect prints of an unhealthy container (abridged).
	out := []byte(`[{"Id":"76023d868850","Name":"/monky-web-1",
	  "Config":{"Labels":{"com.docker.compose.service":"web"}},
	  "State":{"Status":"running","ExitCode":0,"Health":{"Status":"unhealthy","FailingStreak":3,
	    "Log":[{"Start":"2026-12-01T10:00:00Z","End":"2026-12-01T10:00:01Z","ExitCode":1,"Output":"db: connection refused\n"}]}},
	  "RestartCount":0}]`)
	ins, err := compose.ParseInspect(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range ins {
		last := c.HealthLog[len(c.HealthLog)-1]
		fmt.Printf("%s (%s): %s, %s, last check exit %d: %q\n", c.Service, c.Name, c.State, c.Health, last.ExitCode, last.Output)
	}
	// Output:
	// web (monky-web-1): running, unhealthy, last check exit 1: "db: connection refused\n"
}

// ExampleClient_WaitHealthy runs compose up and waits for health. The docker here is
// the fake docker (this test binary, run as "docker": see TestMain); on a box it is
// the real one.
func ExampleClient_WaitHealthy() {
	ctx := context.Background()
	self, _ := os.Executable()
	docker, err := fakedocker.Install(ctx, fakedocker.Options{Program: self})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer docker.Close()
	project, err := os.MkdirTemp("", "compose-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(project)
	_ = os.WriteFile(filepath.Join(project, "compose.yaml"), []byte(`services:
  web:
    image: nginx:1.27
    healthcheck:
      test: ["CMD", "curl", "-f", "http://localhost/"]
  worker:
    image: registry.example/worker:1
`), 0o644)

	c, err := compose.New(compose.Config{
		Project: "monky",
		Dir:     project,
		Files:   []string{"compose.yaml"},
		// the complete environment of docker: nothing else reaches compose
		Env: docker.Env(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.Up(ctx); err != nil {
		fmt.Println(err)
		return
	}
	states, err := c.WaitHealthy(ctx, compose.WaitOptions{
		Services: []string{"web", "worker"},
		Timeout:  time.Minute,
		Poll:     10 * time.Millisecond,
	})
	fmt.Println(err)
	for _, s := range states {
		fmt.Printf("%s %s %s\n", s.Name, s.State, s.Health)
	}
	// Output:
	// <nil>
	// web running healthy
	// worker running
}

// stateReader is a Reader that answers from fixed containers: in the agent it is the
// docker Engine API client, which answers in milliseconds.
type stateReader []compose.Container

func (r stateReader) Containers(context.Context, string) ([]compose.Container, error) {
	return r, nil
}

func (r stateReader) Inspect(_ context.Context, ids []string) ([]compose.Inspected, error) {
	var out []compose.Inspected
	for _, c := range r {
		if c.Service == "worker" {
			out = append(out, compose.Inspected{ID: c.ID, Service: c.Service, RestartCount: 4})
		}
	}
	return out, nil
}

// ExampleClient_Observe judges a project's services once, as a check-in reports them
// between two applies.
func ExampleClient_Observe() {
	reader := stateReader{
		{ID: "a1", Service: "web", State: "running", Health: "healthy", Status: "Up 3 hours (healthy)"},
		{ID: "b2", Service: "worker", State: "restarting", ExitCode: 2, Status: "Restarting (2) 1 second ago"},
	}
	cc, err := compose.New(compose.Config{Project: "monky", Dir: os.TempDir(), Reader: reader})
	if err != nil {
		fmt.Println(err)
		return
	}
	obs, err := cc.Observe(context.Background(), []string{"web", "worker", "db"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("healthy:", obs.Healthy)
	for _, s := range obs.Services {
		fmt.Printf("  %s: %s %s, %d restarts, ready %t\n", s.Name, s.State, s.Health, s.Restarts, s.Ready)
	}
	// Output:
	// healthy: false
	//   db: missing , 0 restarts, ready false
	//   web: running healthy, 0 restarts, ready true
	//   worker: restarting , 4 restarts, ready false
}

// countingReader is stateReader that counts the containers it inspects.
type countingReader struct {
	stateReader
	inspected *int
}

func (r countingReader) Inspect(ctx context.Context, ids []string) ([]compose.Inspected, error) {
	*r.inspected += len(ids)
	return r.stateReader.Inspect(ctx, ids)
}

// ExampleClient_ObserveAfter observes a project a minute after an earlier observation:
// web's container is the same and has been up for hours, so it cannot have restarted
// and is not inspected; the worker is restarting and is.
func ExampleClient_ObserveAfter() {
	inspected := 0
	reader := countingReader{stateReader: stateReader{
		{ID: "a1", Service: "web", State: "running", Health: "healthy", Status: "Up 3 hours (healthy)"},
		{ID: "b2", Service: "worker", State: "restarting", ExitCode: 2, Status: "Restarting (2) 1 second ago"},
	}, inspected: &inspected}
	cc, err := compose.New(compose.Config{Project: "monky", Dir: os.TempDir(), Reader: reader})
	if err != nil {
		fmt.Println(err)
		return
	}
	then := time.Now().Add(-time.Minute)
	prev := compose.Observation{At: then, Services: []compose.ObservedService{
		{Name: "web", State: "running", Health: "healthy", Restarts: 1, Ready: true, Containers: []string{"a1"}, InspectedAt: then},
		{Name: "worker", State: "running", Restarts: 3, Ready: true, Containers: []string{"b2"}, InspectedAt: then},
	}}
	obs, err := cc.ObserveAfter(context.Background(), prev, []string{"web", "worker"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range obs.Services {
		fmt.Printf("%s: %s, %d restarts, ready %t\n", s.Name, s.State, s.Restarts, s.Ready)
	}
	fmt.Println("containers inspected:", inspected)
	// Output:
	// web: running, 1 restarts, ready true
	// worker: restarting, 4 restarts, ready false
	// containers inspected: 1
}
