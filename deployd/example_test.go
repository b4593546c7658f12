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

// exampleBox is a box of the examples: the fake OpenBao and tenancy, a config in a
// temporary directory and the grant beside it, and an agent, with a context of ten
// seconds for its calls; closeAll ends them all.
func exampleBox() (ctx context.Context, agent *deployd.Agent, ten *faketenancy.Server, closeAll func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	bao := fakebao.New(fakebao.Options{})
	ten = faketenancy.New(faketenancy.Options{Authority: bao})
	dir, _ := os.MkdirTemp("", "deployd-example-")
	closeFakes := func() { ten.Close(); bao.Close(); _ = os.RemoveAll(dir); cancel() }
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
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "grant.jwt"), []byte(bao.MintGrant("env-dev-01")), 0o600)
	}
	if err == nil {
		agent, err = deployd.New(ctx, cfg, deployd.Options{DockerEnv: []string{"PATH=/nonexistent"}})
	}
	if err != nil {
		closeFakes()
		return nil, nil, nil, nil, err
	}
	return ctx, agent, ten, func() { _ = agent.Close(); closeFakes() }, nil
}

// Example runs one tick of a box against the fake tenancy and OpenBao: the box
// bootstraps itself from its grant and checks in; tenancy has nothing for it.
func Example() {
	ctx, agent, _, closeAll, err := exampleBox()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()
	out, err := agent.Tick(ctx)
	fmt.Println("action:", out.Action, "exit:", deployd.ExitCode(err))
	// Output: action: none exit: 0
}

// ExampleAgent_Plan asks what an apply would change on a box of the fakes: the first
// tick bootstraps the box (plan never logs into OpenBao), then tenancy publishes a
// bundle and the plan lists its services as added, without a lease.
func ExampleAgent_Plan() {
	ctx, agent, ten, closeAll, err := exampleBox()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()
	if _, err := agent.Tick(ctx); err != nil { // bootstraps; nothing to do yet
		fmt.Println(err)
		return
	}
	b, err := faketenancy.BuildBundle(faketenancy.SampleApp("env-dev-01", 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, _, err := ten.PublishBundle("env-dev-01", b.Data); err != nil {
		fmt.Println(err)
		return
	}
	p, err := agent.Plan(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range p.Services {
		fmt.Println(s.Name, s.Change)
	}
	fmt.Println("changes:", p.Changes, "leases:", len(ten.Leases("env-dev-01")))
	// Output:
	// migrate added
	// web added
	// changes: true leases: 0
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
