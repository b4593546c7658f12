package deployd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
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

// check stops the example on an error; must is check for a call that also returns a value.
func check(err error) {
	if err != nil {
		panic(err)
	}
}

func must[T any](v T, err error) T {
	check(err)
	return v
}

// Example_fakeDocker applies a bundle end to end with no docker daemon: the fake
// tenancy, OpenBao and docker (fakestack with Options.Docker), and an agent in-process. The first
// release comes up healthy; a script makes the second one's web service unhealthy,
// and the agent goes back to the first.
func Example_fakeDocker() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const env = "env-dev-01"

	s := must(fakestack.Start(ctx, fakestack.Options{Docker: &fakedocker.Options{}}))
	defer s.Close()
	d := s.Docker

	dir := must(os.MkdirTemp("", "fakedocker-example-"))
	defer os.RemoveAll(dir)
	cfg := must(deployd.ParseConfig("config.yaml", fmt.Appendf(nil, `env_id: %[1]s
deploy_dir: %[2]s/srv
state_dir: %[2]s/state
bootstrap_grant: %[2]s/grant.jwt
min_free_mb: 1
tenancy:
  transport: system
  url: %[3]s
bao:
  addr: %[4]s
compose:
  health_timeout: 20s
`, env, dir, s.Tenancy.URL(), s.Bao.URL())))
	check(os.WriteFile(filepath.Join(dir, "grant.jwt"), []byte(s.Bao.MintGrant(env)), 0o600))
	s.Bao.PutSecret(env, "db", map[string]string{"password": "example-password"})
	agent := must(deployd.New(ctx, cfg, deployd.Options{DockerEnv: d.Env(), HealthPoll: 20 * time.Millisecond}))
	defer agent.Close()

	publish := func(serial int64) string {
		b := must(faketenancy.BuildBundle(faketenancy.SampleApp(env, serial)))
		sha, _, err := s.Tenancy.PublishBundle(env, b.Data)
		check(err)
		return sha
	}
	tick := func() {
		out, err := agent.Tick(ctx)
		fmt.Printf("tick: %s %s, code %q, exit %d\n", out.Action, out.Result, out.Code, deployd.ExitCode(err))
	}

	publish(1)
	tick()
	sha2 := publish(2)
	check(d.SetScript(&fakedocker.Script{Releases: map[string]map[string]fakedocker.Service{
		sha2: {"web": {States: []fakedocker.State{{Health: "starting"}, {Health: "unhealthy", HealthOutput: "GET /health: 500"}}}},
	}}))
	tick()

	for _, r := range s.Tenancy.Reports(env) {
		fmt.Printf("report: serial %d %s, code %q\n", r.Serial, r.Result, r.Code)
	}
	fmt.Println("serving serial", must(deployd.ReadState(cfg)).LiveSerial)
	ups, reads := 0, 0
	for _, c := range must(d.Calls()) {
		if c.Compose("up") {
			ups++
		}
		if c.Argv[0] == fakedocker.EngineArgv0 {
			reads++
		}
	}
	fmt.Println("compose up:", ups, "(release 1, release 2, release 1 again); Engine API reads:", reads > 0)
	// Output:
	// tick: apply applied, code "", exit 0
	// tick: apply failed, code "UNHEALTHY", exit 1
	// report: serial 1 applied, code ""
	// report: serial 2 failed, code "UNHEALTHY"
	// serving serial 1
	// compose up: 3 (release 1, release 2, release 1 again); Engine API reads: true
}
