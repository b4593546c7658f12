package fakedocker_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

// Example plays a scripted compose project in-process: up, then ps twice while a
// service becomes healthy.
func Example() {
	dir, _ := os.MkdirTemp("", "fakedocker-example-")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte("services:\n  web:\n    image: nginx\n"), 0o644)
	script := &fakedocker.Script{
		PSFormat: fakedocker.PSArray,
		Services: map[string]fakedocker.Service{
			"web": {States: []fakedocker.State{{Health: "starting"}, {Health: "healthy"}}},
		},
	}
	_ = script.WriteFile(filepath.Join(dir, "script.json"))
	env := []string{
		fakedocker.EnvLog + "=" + filepath.Join(dir, "docker.log"),
		fakedocker.EnvScript + "=" + filepath.Join(dir, "script.json"),
	}
	compose := []string{"compose", "--project-name", "demo", "--project-directory", dir, "-f", "compose.yaml"}
	docker := func(args ...string) int {
		return fakedocker.Main(append(compose, args...), env, nil, os.Stdout, os.Stdout)
	}
	docker("up", "-d", "--remove-orphans")
	for range 2 {
		docker("ps", "--all", "-q")
		fakedocker.Main(append(compose, "ps", "--services"), env, nil, os.Stdout, os.Stdout)
	}
	calls, _ := fakedocker.ReadCalls(filepath.Join(dir, "docker.log"))
	fmt.Println(len(calls), "calls recorded")
	st, _ := fakedocker.ReadStatus(filepath.Join(dir, "docker.log.state"))
	fmt.Println("up:", st.Up, "ps calls:", st.PSCalls)
	// Output:
	//  Container demo-web-1  Started
	// 4ee5d157b9351861675d335bc49e1f08f3f750d84b3eb31d7a4443c10b794e08
	// web
	// 4ee5d157b9351861675d335bc49e1f08f3f750d84b3eb31d7a4443c10b794e08
	// web
	// 5 calls recorded
	// up: true ps calls: 4
}
