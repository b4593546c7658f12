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

// ExampleAgent_Plan asks what an apply would change on a box of the fakes: the first
// tick bootstraps the box (plan never logs into OpenBao), then tenancy publishes a
// bundle and the plan lists its services as added, without a lease.
func ExampleAgent_Plan() {
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
