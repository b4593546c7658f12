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

// withExampleBox runs example on a box of the examples: the fake OpenBao and tenancy,
// a config in a temporary directory and the grant beside it, and an agent, with a
// context of ten seconds; it prints the error example (or the box) ends on, and ends
// them all.
func withExampleBox(example func(ctx context.Context, agent *deployd.Agent, ten *faketenancy.Server) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "grant.jwt"), []byte(bao.MintGrant("env-dev-01")), 0o600)
	}
	var agent *deployd.Agent
	if err == nil {
		agent, err = deployd.New(ctx, cfg, deployd.Options{DockerEnv: []string{"PATH=/nonexistent"}})
	}
	if err == nil {
		err = example(ctx, agent, ten)
		_ = agent.Close()
	}
	if err != nil {
		fmt.Println(err)
	}
}

// Example runs one tick of a box against the fake tenancy and OpenBao: the box
// bootstraps itself from its grant and checks in; tenancy has nothing for it.
func Example() {
	withExampleBox(func(ctx context.Context, agent *deployd.Agent, _ *faketenancy.Server) error {
		out, err := agent.Tick(ctx)
		fmt.Println("action:", out.Action, "exit:", deployd.ExitCode(err))
		return nil
	})
	// Output: action: none exit: 0
}

// ExampleAgent_Plan asks what an apply would change on a box of the fakes: the first
// tick bootstraps the box (plan never logs into OpenBao), then tenancy publishes a
// bundle and the plan lists its services as added, without a lease.
func ExampleAgent_Plan() {
	withExampleBox(func(ctx context.Context, agent *deployd.Agent, ten *faketenancy.Server) error {
		if _, err := agent.Tick(ctx); err != nil { // bootstraps; nothing to do yet
			return err
		}
		b, err := faketenancy.BuildBundle(faketenancy.SampleApp("env-dev-01", 1))
		if err != nil {
			return err
		}
		if _, _, err := ten.PublishBundle("env-dev-01", b.Data); err != nil {
			return err
		}
		p, err := agent.Plan(ctx)
		if err != nil {
			return err
		}
		for _, s := range p.Services {
			fmt.Println(s.Name, s.Change)
		}
		fmt.Println("changes:", p.Changes, "leases:", len(ten.Leases("env-dev-01")))
		return nil
	})
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
