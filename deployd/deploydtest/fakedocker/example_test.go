package fakedocker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// Example applies a bundle end to end with no docker daemon: the fake tenancy, OpenBao
// and docker (fakestack with Options.Docker), and an agent in-process. The first
// release comes up healthy; a script makes the second one's web service unhealthy,
// and the agent goes back to the first.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const env = "env-dev-01"

	s, err := fakestack.Start(ctx, fakestack.Options{Docker: &fakedocker.Options{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	d := s.Docker

	dir, err := os.MkdirTemp("", "fakedocker-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	cfg, err := deployd.ParseConfig("config.yaml", fmt.Appendf(nil, `env_id: %[1]s
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
`, env, dir, s.Tenancy.URL(), s.Bao.URL()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "grant.jwt"), []byte(s.Bao.MintGrant(env)), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	s.Bao.PutSecret(env, "db", map[string]string{"password": "example-password"})
	agent, err := deployd.New(ctx, cfg, deployd.Options{DockerEnv: d.Env(), HealthPoll: 20 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer agent.Close()

	publish := func(serial int64) (string, error) {
		b, err := faketenancy.BuildBundle(faketenancy.SampleApp(env, serial))
		if err != nil {
			return "", err
		}
		sha, _, err := s.Tenancy.PublishBundle(env, b.Data)
		return sha, err
	}
	tick := func() {
		out, err := agent.Tick(ctx)
		fmt.Printf("tick: %s %s, code %q, exit %d\n", out.Action, out.Result, out.Code, deployd.ExitCode(err))
	}

	if _, err := publish(1); err != nil {
		fmt.Println(err)
		return
	}
	tick()
	sha2, err := publish(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = d.SetScript(&fakedocker.Script{Releases: map[string]map[string]fakedocker.Service{
		sha2: {"web": {States: []fakedocker.State{{Health: "starting"}, {Health: "unhealthy", HealthOutput: "GET /health: 500"}}}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	tick()

	for _, r := range s.Tenancy.Reports(env) {
		fmt.Printf("report: serial %d %s, code %q\n", r.Serial, r.Result, r.Code)
	}
	st, err := deployd.ReadState(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("serving serial", st.LiveSerial)
	calls, err := d.Calls()
	if err != nil {
		fmt.Println(err)
		return
	}
	ups, reads := 0, 0
	for _, c := range calls {
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
