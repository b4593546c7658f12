package deployd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// Example runs one tick of a box against the fake tenancy and OpenBao: the box
// bootstraps itself from its grant and checks in; tenancy has nothing for it.
func Example() {
	bao := fakebao.New(fakebao.Options{})
	defer bao.Close()
	ten := faketenancy.New(faketenancy.Options{Authority: bao})
	defer ten.Close()

	dir, _ := os.MkdirTemp("", "deployd-example-")
	defer os.RemoveAll(dir)
	cfg, err := deployd.ParseConfig("config.yaml", fmt.Appendf(nil, `env_id: env-dev-01
deploy_dir: %[1]s/srv
state_dir: %[1]s/state
bootstrap_grant: %[1]s/grant.jwt
tenancy:
  transport: system
  url: %[2]s
bao:
  addr: %[3]s
`, dir, ten.URL(), bao.URL()))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "grant.jwt"), []byte(bao.MintGrant("env-dev-01")), 0o600)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agent, err := deployd.New(ctx, cfg, deployd.Options{DockerEnv: []string{"PATH=/nonexistent"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer agent.Close()
	out, err := agent.Tick(ctx)
	fmt.Println("action:", out.Action, "exit:", deployd.ExitCode(err))
	// Output: action: none exit: 0
}

// ExampleExitCode shows the exit code contract with the systemd timer.
func ExampleExitCode() {
	fmt.Println(deployd.ExitCode(nil))
	fmt.Println(deployd.ExitCode(deployd.ErrLocked))
	fmt.Println(deployd.ExitCode(deployd.ErrEnvMismatch))
	fmt.Println(deployd.ExitCode(deployd.ErrNoCredentials))
	// Output:
	// 0
	// 75
	// 78
	// 1
}
