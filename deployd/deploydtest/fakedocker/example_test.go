package fakedocker_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
)

// Example installs a fake docker with a script, runs the program as the code under
// test would (Env is its whole environment), scripts it again, and reads the record.
// The deployd package's Example_fakeDocker runs an agent against it.
func Example() {
	ctx := context.Background()
	d, err := fakedocker.Install(ctx, fakedocker.Options{Script: &fakedocker.Script{ServerVersion: "27.5.1"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	version := func() {
		cmd := exec.CommandContext(ctx, d.Path, "version", "--format", "{{.Server.Version}}")
		cmd.Env = d.Env()
		out, err := cmd.Output()
		fmt.Printf("docker version: %s %v\n", strings.TrimSpace(string(out)), err)
	}
	version()
	if err := d.SetScript(&fakedocker.Script{Commands: map[string]fakedocker.Command{"version": {Exit: 1, Stderr: "Cannot connect to the Docker daemon"}}}); err != nil {
		fmt.Println(err)
		return
	}
	version()
	calls, err := d.Calls()
	for _, c := range calls {
		fmt.Println("recorded: docker", strings.Join(c.Argv, " "))
	}
	fmt.Println("record:", err)
	// Output:
	// docker version: 27.5.1 <nil>
	// docker version:  exit status 1
	// recorded: docker version --format {{.Server.Version}}
	// recorded: docker version --format {{.Server.Version}}
	// record: <nil>
}
