// Command quickstart runs monky-deployd's whole job on one machine with nothing
// installed but Go: it starts the shipped fake tenancy and fake OpenBao on loopback,
// installs the fake docker (this very program, which the agent runs as "docker", and
// the fake docker Engine API on a unix socket, named by DOCKER_HOST), writes a box
// config into a temporary directory, and then walks through a box's life:
//
//  1. bootstrap with a one-time grant;
//  2. apply a sample bundle whose web service reads a secret from OpenBao;
//  3. tick again: nothing to do;
//  4. status, as `monky-deployd status` prints it;
//  5. a hostile bundle (privileged, the docker socket, an unset variable) is refused
//     before any lease is taken;
//  6. down.
//
// Run it with `go run ./examples/quickstart` (add -keep to keep the directory). It
// imports only the public packages of monky-deployd: another module can do the same.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

const envID = "env-dev-01"

func main() {
	// Run by the agent as docker (fakedocker.Install put this program in place under
	// that name): be the fake docker.
	if filepath.Base(os.Args[0]) == "docker" {
		fakedocker.Main()
	}
	keep := flag.Bool("keep", false, "keep the temporary directory")
	verbose := flag.Bool("v", false, "show the agent's debug log")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *keep, *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "quickstart: %v\n", err)
		os.Exit(1)
	}
}

type walkthrough struct {
	out     io.Writer
	step    int
	tenancy *faketenancy.Server
	bao     *fakebao.Server
	agent   *deployd.Agent
	cfg     deployd.Config
}

func (w *walkthrough) say(format string, args ...any) {
	w.step++
	fmt.Fprintf(w.out, "\n== %d. %s\n", w.step, fmt.Sprintf(format, args...))
}

func (w *walkthrough) tick(ctx context.Context) (deployd.Outcome, error) {
	out, err := w.agent.Tick(ctx)
	fmt.Fprintf(w.out, "   -> action=%s result=%s code=%s leased=%t exit=%d (%s)\n",
		orDash(out.Action), orDash(out.Result), orDash(string(out.Code)), out.Leased, deployd.ExitCode(err), out.Duration.Round(time.Millisecond))
	return out, err
}

func run(ctx context.Context, stdout io.Writer, keep, verbose bool) error {
	dir, err := os.MkdirTemp("", "monky-quickstart-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(stdout, "working directory: %s (kept)\n", dir)
	} else {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	// The fakes: tenancy and OpenBao on loopback, and the fake docker — this program as
	// "docker" (a hard link in dir/bin), its record, state and script in dir, and the
	// fake docker Engine API on a unix socket over the same state, which the agent finds
	// through the environment it gives docker (PATH and DOCKER_HOST).
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fakes, err := fakestack.Start(ctx, fakestack.Options{Docker: &fakedocker.Options{Dir: dir, Program: self}})
	if err != nil {
		return err
	}
	defer func() { _ = fakes.Close() }()
	ten, bao, docker := fakes.Tenancy, fakes.Bao, fakes.Docker

	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: level}))
	fmt.Fprintf(stdout, "fake tenancy on %s, fake OpenBao on %s, fake docker at %s, fake docker engine on %s\n", ten.URL(), bao.URL(), docker.Path, docker.DockerHost())

	configPath := filepath.Join(dir, "config.yaml")
	config := fmt.Sprintf(`env_id: %s
deploy_dir: %s
state_dir: %s
bootstrap_grant: %s
min_free_mb: 1
tenancy:
  transport: system
  url: %s
  timeout: 10s
bao:
  addr: %s
compose:
  project: quickstart
  docker: %s
  health_timeout: 30s
  keep_releases: 2
`, envID, filepath.Join(dir, "srv"), filepath.Join(dir, "state"), filepath.Join(dir, "bootstrap.jwt"), ten.URL(), bao.URL(), docker.Path)
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return err
	}
	cfg, err := deployd.LoadConfig(configPath)
	if err != nil {
		return err
	}
	agent, err := deployd.New(ctx, cfg, deployd.Options{
		Logger:     logger,
		Hostname:   "quickstart",
		HealthPoll: 200 * time.Millisecond,
		DockerEnv:  docker.Env(),
	})
	if err != nil {
		return err
	}
	defer func() { _ = agent.Close() }()
	w := &walkthrough{out: stdout, tenancy: ten, bao: bao, agent: agent, cfg: cfg}

	w.say("bootstrap: tenancy hands the box a one-time grant at %s", cfg.BootstrapGrant)
	bao.PutSecret(envID, "db", map[string]string{"password": "quickstart-db-password"})
	if err := os.WriteFile(cfg.BootstrapGrant, []byte(bao.MintGrant(envID)+"\n"), 0o600); err != nil {
		return err
	}
	if _, err := agent.Bootstrap(ctx, ""); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	_, statErr := os.Stat(cfg.BootstrapGrant)
	fmt.Fprintf(stdout, "   -> token stored at %s; grant consumed: %t\n", cfg.TokenPath(), os.IsNotExist(statErr))

	w.say("apply: tenancy publishes a bundle (web + migrate, config/app.toml, DB_PASSWORD from OpenBao)")
	app := faketenancy.SampleApp(envID, 1)
	app.Gzip = true
	b, err := faketenancy.BuildBundle(app)
	if err != nil {
		return err
	}
	sha, serial, err := ten.PublishBundle(envID, b.Data)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "   published sha %s serial %d\n", sha[:12], serial)
	if out, err := w.tick(ctx); err != nil || out.Result != "applied" {
		return fmt.Errorf("apply: result %q: %w", out.Result, err)
	}
	env, err := os.Stat(filepath.Join(cfg.CurrentLink(), ".env"))
	if err != nil {
		return err
	}
	target, _ := os.Readlink(cfg.CurrentLink())
	fmt.Fprintf(stdout, "   current -> %s; .env mode %v (the only place the secret lives on the box)\n", target, env.Mode().Perm())

	w.say("tick again: tenancy has nothing new")
	ten.SetDesired(envID, faketenancy.Desired{Action: "none"})
	if _, err := w.tick(ctx); err != nil {
		return fmt.Errorf("idle tick: %w", err)
	}

	w.say("status (no network)")
	st, err := deployd.ReadState(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "   live %s serial %d, healthy %t, last result %s, last check-in %s\n",
		st.LiveSHA[:12], st.LiveSerial, st.Confirmed, st.LastResult, st.LastCheckin.Format(time.RFC3339))

	w.say("a hostile bundle: privileged, the docker socket, an unset variable")
	hostile := faketenancy.SampleApp(envID, 2)
	hostile.Files["compose.yaml"] = `services:
  web:
    image: nginx:1.27
    privileged: true
    volumes:
      - /var/run/docker.sock:/var/run/docker.sock
      - ${DATA_DIR}:/data
`
	hb, err := faketenancy.BuildBundle(hostile)
	if err != nil {
		return err
	}
	leasesBefore := len(ten.Leases(envID))
	if _, _, err := ten.PublishBundle(envID, hb.Data); err != nil {
		return err
	}
	out, err := w.tick(ctx)
	if err == nil || out.Result != "failed" {
		return fmt.Errorf("the hostile bundle was not refused")
	}
	for _, line := range strings.Split(strings.TrimPrefix(out.Detail, "bundle refused: "), "; ") {
		fmt.Fprintf(stdout, "   refused: %s\n", line)
	}
	fmt.Fprintf(stdout, "   leases taken for it: %d; the box still serves %s\n", len(ten.Leases(envID))-leasesBefore, st.LiveSHA[:12])

	w.say("down: tenancy takes the environment down")
	ten.SetDesired(envID, faketenancy.Desired{Action: "down", Purge: true})
	if out, err := w.tick(ctx); err != nil || out.Result != "down" {
		return fmt.Errorf("down: result %q: %w", out.Result, err)
	}

	w.say("what tenancy received")
	for _, r := range ten.Reports(envID) {
		data, _ := json.Marshal(map[string]any{"result": r.Result, "code": r.Code, "sha": short(r.SHA), "serial": r.Serial})
		fmt.Fprintf(stdout, "   report %s\n", data)
	}
	calls, err := docker.Calls()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "   docker was called %d times:\n", len(calls))
	for _, c := range calls {
		fmt.Fprintf(stdout, "     docker %s\n", strings.Join(shortArgs(c.Argv), " "))
	}
	fmt.Fprintln(stdout, "\nquickstart done: bootstrap, apply, idle, status, refusal and down all behaved.")
	return nil
}

func shortArgs(argv []string) []string {
	out := make([]string, 0, len(argv))
	for i := 0; i < len(argv); i++ {
		if argv[i] == "--project-directory" && i+1 < len(argv) {
			out = append(out, argv[i], ".../"+filepath.Base(argv[i+1])[:12])
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return out
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
