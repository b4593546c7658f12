package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/logging"
	"github.com/monky/monky-deployd/internal/metrics"
)

// commit is set at build time with -ldflags "-X main.commit=…".
var commit = "unknown"

// exitUsage is the exit code of a usage error.
const exitUsage = 2

const usage = `usage:
  monky-deployd run [--config PATH] [--loop [--interval D]] [--metrics-file PATH]
  monky-deployd status [--config PATH] [--json]
  monky-deployd plan [--config PATH] [--json]
                     what an apply would change: exit 0 nothing, 2 changes, 1 refused
  monky-deployd bootstrap [--config PATH] [--grant PATH] [--force]
  monky-deployd hold [--config PATH] [--for D --reason TEXT | --clear]
                     hold the box (no switch to a new release) for D, clear it, or show it
  monky-deployd verify --env ENV [--sha SHA] [--json] [--allow-privileged SVC,…]
                       [--live-serial N] [--rollback] [--key PUBKEY]… [--sig FILE] BUNDLE
  monky-deployd pack --out BUNDLE [--json] DIR
  monky-deployd sign --key PRIVATE_KEY_FILE [--expires D|TIME] [--env ENV] [--out FILE]
                     [--json] BUNDLE
  monky-deployd keygen --out PRIVATE_KEY_FILE
  monky-deployd version
  monky-deployd help [COMMAND]
                     this text, or a command's usage and flags (as COMMAND --help)
`

// cli carries what the subcommands share: the environment and the streams.
type cli struct {
	environ []string
	env     map[string]string
	stdout  io.Writer
	stderr  io.Writer
	red     *secret.Redactor
	log     *slog.Logger
}

// Main runs the command line args with the environment env and returns the exit code.
// It is the whole program, so that tests run it in-process.
func Main(ctx context.Context, args []string, env []string, stdout, stderr io.Writer) int {
	c := &cli{environ: env, env: map[string]string{}, stdout: stdout, stderr: stderr, red: secret.NewRedactor()}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			c.env[k] = v
		}
	}
	c.log = logging.ForAgent(stderr, c.env, c.red.Handler)
	// compose-go and the OpenZiti SDK log through the process-global logrus logger:
	// route it into slog (and so through the redactor), never to raw stderr.
	logging.RouteLogrus(logrus.StandardLogger(), c.log)
	// At debug the OpenZiti SDK logs its API session and service session tokens, which
	// no redactor knows: logrus never goes below info, whatever the agent's level.
	if logrus.StandardLogger().GetLevel() > logrus.InfoLevel {
		logrus.StandardLogger().SetLevel(logrus.InfoLevel)
	}

	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return exitUsage
	}
	return c.command(ctx, args[0], args[1:])
}

// commands are the commands of the binary by name, help aside (command).
var commands = map[string]func(c *cli, ctx context.Context, args []string) int{
	"run":       (*cli).run,
	"status":    noContext((*cli).status),
	"plan":      (*cli).plan,
	"bootstrap": (*cli).bootstrap,
	"hold":      noContext((*cli).hold),
	"verify":    (*cli).verify,
	"pack":      (*cli).pack,
	"sign":      (*cli).sign,
	"keygen":    noContext((*cli).keygen),
	"version":   noContext((*cli).version),
	"--version": noContext((*cli).version),
}

// noContext makes a command that needs no context one of commands.
func noContext(cmd func(c *cli, args []string) int) func(*cli, context.Context, []string) int {
	return func(c *cli, _ context.Context, args []string) int { return cmd(c, args) }
}

// command runs the command name with its arguments args. help is not in commands:
// it runs command again (an initialization cycle in the table).
func (c *cli) command(ctx context.Context, name string, args []string) int {
	switch name {
	case "help", "-h", "--help":
		return c.help(ctx, args)
	}
	if run, ok := commands[name]; ok {
		return run(c, ctx, args)
	}
	_, _ = fmt.Fprintf(c.stderr, "monky-deployd: unknown command %q\n%s", name, usage)
	return exitUsage
}

// help is `monky-deployd help [COMMAND]`: the usage of every command, or COMMAND's
// usage and flags as `monky-deployd COMMAND --help` prints them.
func (c *cli) help(ctx context.Context, args []string) int {
	switch {
	case len(args) > 1:
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd help: expected at most 1 argument, got %d: %q\n", len(args), args)
		return exitUsage
	case len(args) == 0, args[0] == "help", args[0] == "-h", args[0] == "--help":
		return c.output(usage)
	default:
		return c.command(ctx, args[0], []string{"--help"})
	}
}

// version is `monky-deployd version`: the release and the commit it was built from.
func (c *cli) version(args []string) int {
	fs := c.flags("version")
	if code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	return c.output(fmt.Sprintf("monky-deployd %s (commit %s)\n", deployd.Version, commit))
}

// flags returns the flag set of the command name, which parse parses.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("monky-deployd "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {} // parse prints the usage, on stdout for --help, on stderr for an error
	return fs
}

// parse parses args, refuses stray arguments and checks that the flags named in
// required have a value. It reports whether the command goes on; when it does not,
// code is the command's exit code: 0 after -h or --help, which print the command's
// usage on stdout, and 2 for a usage error, said on stderr.
func (c *cli) parse(fs *flag.FlagSet, args []string, positional int, required ...string) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return c.output(helpText(fs)), false
	case err != nil: // the flag package said what is wrong
		_, _ = fmt.Fprint(c.stderr, helpText(fs))
		return exitUsage, false
	case fs.NArg() != positional:
		_, _ = fmt.Fprintf(c.stderr, "%s: expected %d argument(s), got %d: %q\n", fs.Name(), positional, fs.NArg(), fs.Args())
		return exitUsage, false
	}
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			_, _ = fmt.Fprintf(c.stderr, "%s: --%s is required\n", fs.Name(), name)
			return exitUsage, false
		}
	}
	return 0, true
}

// commandUsage returns the lines of usage that describe the command name: the line
// that starts with it and the more deeply indented lines after it; "" for no command.
func commandUsage(name string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(usage) {
		switch {
		case strings.HasPrefix(line, "  monky-deployd "):
			cmd, _, _ := strings.Cut(strings.TrimPrefix(line, "  monky-deployd "), " ")
			in = strings.TrimSpace(cmd) == name
		case !strings.HasPrefix(line, "   "):
			in = false
		}
		if in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// helpText is what `monky-deployd COMMAND --help` prints: the command's lines of
// usage, then its flags, spelt --name as in the usage (the flag package takes both).
func helpText(fs *flag.FlagSet) string {
	var defaults strings.Builder
	out := fs.Output()
	fs.SetOutput(&defaults)
	fs.PrintDefaults()
	fs.SetOutput(out)
	text := "usage:\n" + commandUsage(strings.TrimPrefix(fs.Name(), "monky-deployd "))
	if defaults.Len() > 0 {
		// Each flag's line starts "  -name"; its description lines start with a tab.
		text += "\nflags:\n" + strings.ReplaceAll("\n"+defaults.String(), "\n  -", "\n  --")[1:]
	}
	return text
}

// config is the prologue of the subcommands that read the box's config (status, and
// through withAgent run, bootstrap and plan): it parses args (no positional arguments)
// and loads the config at *configPath. It reports whether the command goes on; when it
// does not, code is its exit code: parse's (0 after --help, 2 for a usage error), or 1
// for a config LoadConfig refused (CONFIG_INVALID), logged.
func (c *cli) config(fs *flag.FlagSet, args []string, configPath *string) (deployd.Config, int, bool) {
	if code, ok := c.parse(fs, args, 0); !ok {
		return deployd.Config{}, code, false
	}
	cfg, err := deployd.LoadConfig(*configPath)
	if err != nil {
		c.log.Error("the config is invalid; fix it and run again", "config", *configPath, "code", deployd.CodeOf(err), "err", err)
		return deployd.Config{}, deployd.ExitFailed, false
	}
	return cfg, 0, true
}

// withAgent is the prologue of the subcommands that act through the agent
// (bootstrap, plan): it parses args and loads the config (config), opens the agent,
// runs do with it and closes it. A failure to get that far exits with its code (an
// agent that cannot be opened is logged).
func (c *cli) withAgent(ctx context.Context, fs *flag.FlagSet, args []string, configPath *string, do func(*deployd.Agent, deployd.Config) int) int {
	cfg, code, ok := c.config(fs, args, configPath)
	if !ok {
		return code
	}
	return c.withAgentOf(ctx, cfg, *configPath, func(a *deployd.Agent) int { return do(a, cfg) }).exit
}

// agentExit is how a run through the agent ended: its exit code, and whether it
// ended before the agent ran (it could not be opened).
type agentExit struct {
	exit  int
	early bool
}

// withAgentOf opens the agent of cfg (read from configPath), runs do with it and
// closes it; an agent that cannot be opened is logged and ends early.
func (c *cli) withAgentOf(ctx context.Context, cfg deployd.Config, configPath string, do func(*deployd.Agent) int) agentExit {
	host, _ := os.Hostname()
	a, err := deployd.New(ctx, cfg, deployd.Options{Logger: c.log, Redactor: c.red, DockerEnv: deployd.DockerEnv(c.environ), Hostname: host})
	if err != nil {
		c.log.Error("could not start the agent", "config", configPath, "code", deployd.CodeOf(err), "err", err)
		return agentExit{exit: deployd.ExitCode(err), early: true}
	}
	defer c.closeAgent(a)
	return agentExit{exit: do(a)}
}

func (c *cli) run(ctx context.Context, args []string) int {
	fs := c.flags("run")
	configPath := fs.String("config", deployd.DefaultConfigPath, "config file")
	loop := fs.Bool("loop", false, "run ticks until stopped, for hosts without systemd")
	interval := fs.Duration("interval", time.Minute, "with --loop: the pause between ticks when tenancy names none")
	metricsFile := fs.String("metrics-file", "", "write Prometheus text-format metrics here after each tick (node_exporter textfile collector)")
	if code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	// Every run that was not a usage error writes the metrics file, one that could not
	// tick included (a bad config, no agent, no compose): no stale exit_code 0.
	cfg, err := deployd.LoadConfig(*configPath)
	if err != nil {
		c.log.Error("the config is invalid; fix it and run again", "config", *configPath, "code", deployd.CodeOf(err), "err", err)
		v, _ := deployd.StatusOf(*configPath, deployd.StatusOptions{})
		c.writeMetrics(*metricsFile, v, 0, deployd.ExitFailed)
		return deployd.ExitFailed
	}
	code := c.withAgentOf(ctx, cfg, *configPath, func(a *deployd.Agent) int {
		if code := c.checkCompose(cfg); code != 0 {
			c.writeMetrics(*metricsFile, a.Status(), 0, code)
			return code
		}
		if !*loop {
			return c.tick(ctx, a, *metricsFile)
		}
		return a.Loop(ctx, deployd.LoopOptions{
			Interval: *interval,
			Tick:     func(ctx context.Context) int { return c.tick(ctx, a, *metricsFile) },
		})
	})
	if code.early {
		c.writeMetrics(*metricsFile, deployd.ReadStatus(cfg, deployd.StatusOptions{Secrets: c.red}), 0, code.exit)
	}
	return code.exit
}

// closeAgent releases the agent's transport; a failure only matters to the log.
func (c *cli) closeAgent(a *deployd.Agent) {
	if err := a.Close(); err != nil {
		c.log.Warn("could not close the tenancy transport", "err", err)
	}
}

func (c *cli) tick(ctx context.Context, a *deployd.Agent, metricsFile string) int {
	out, err := a.Tick(ctx)
	code := deployd.ExitCode(err)
	attrs := []any{"action", out.Action, "result", out.Result, "code", out.Code, "sha", out.SHA, "serial", out.Serial,
		"leased", out.Leased, "duration", out.Duration.Round(time.Millisecond), "exit", code}
	if out.Deferred != "" {
		attrs = append(attrs, "deferred", out.Deferred) // prepared, not switched: a hold or a window
	}
	switch code {
	case deployd.ExitOK:
		c.log.Info("tick done", attrs...)
	case deployd.ExitTemporary:
		c.log.Warn("tick ended on a temporary condition; the next tick retries", append(attrs, "err", err)...)
	default:
		c.log.Error("tick failed", append(attrs, "err", err)...)
	}
	c.writeMetrics(metricsFile, a.Status(), out.Duration, code)
	return code
}

// writeMetrics writes the metrics file of a run that ended with exit after tick, as
// the status v tells the box; "" writes none. A file that cannot be written is
// logged and changes no exit code.
func (c *cli) writeMetrics(path string, v deployd.Status, tick time.Duration, exit int) {
	if path == "" {
		return
	}
	if err := metrics.Write(path, snapshot(v, time.Now(), tick, exit)); err != nil {
		c.log.Warn("could not write the metrics file", "path", path, "err", err)
	}
}

func (c *cli) bootstrap(ctx context.Context, args []string) int {
	fs := c.flags("bootstrap")
	configPath := fs.String("config", deployd.DefaultConfigPath, "config file")
	grant := fs.String("grant", "", "bootstrap grant file (default: the config's bootstrap_grant)")
	force := fs.Bool("force", false, "log in with the grant even when the stored token is valid")
	return c.withAgent(ctx, fs, args, configPath, func(a *deployd.Agent, _ deployd.Config) int {
		res, err := a.BootstrapWith(ctx, deployd.BootstrapOptions{Grant: *grant, Force: *force})
		if err != nil {
			c.log.Error("bootstrap failed", "code", deployd.CodeOf(err), "err", err, "exit", deployd.ExitCode(err))
			return deployd.ExitCode(err)
		}
		if !res.Already {
			c.log.Info("bootstrap confirmed by a check-in", "action", res.Action)
		}
		return 0
	})
}

func writeRefusals(w *strings.Builder, refusals []bundle.Refusal) {
	for _, r := range refusals {
		fmt.Fprintf(w, "%s: %s\n", r.Code, r.Detail)
	}
}

// output writes the command's result to stdout. A result that cannot be written (a
// closed pipe, a full disk) is a failure: exit 1, not a silent 0.
func (c *cli) output(s string) int {
	if _, err := io.WriteString(c.stdout, s); err != nil {
		c.log.Error("could not write the output", "err", err)
		return deployd.ExitFailed
	}
	return 0
}

// verifyJSON is what `verify --json` prints. warnings (compose's own, naming the
// bundle's file) was added after sha and refusals; it is always a list. signature
// (sign.go) was added after them, only with --key.
type verifyJSON struct {
	SHA       string            `json:"sha"`
	Refusals  []bundle.Refusal  `json:"refusals"`
	Warnings  []string          `json:"warnings"`
	Signature *signatureVerdict `json:"signature,omitempty"`
}

func (c *cli) verify(ctx context.Context, args []string) int {
	fs := c.flags("verify")
	env := fs.String("env", "", "the box's env_id (required)")
	sha := fs.String("sha", "", "the bundle sha tenancy asked for (optional)")
	asJSON := fs.Bool("json", false, `print {"sha":…,"refusals":[…],"warnings":[…]}`)
	allow := fs.String("allow-privileged", "", "comma-separated services allowed to be privileged")
	liveSerial := fs.Int64("live-serial", 0, "the live release's serial (ROLLBACK check)")
	rollback := fs.Bool("rollback", false, "the rollback is explicit")
	var keys keysFlag
	fs.Var(&keys, "key", "a trusted public key (ed25519:…) or a file holding one; repeat for several; checks the signature")
	sigPath := fs.String("sig", "", "with --key: the signature file (default: BUNDLE.sig)")
	if code, ok := c.parse(fs, args, 1, "env"); !ok {
		return code
	}
	ring, err := keys.keyRing()
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd verify: --key: %v\n", err)
		return exitUsage
	}
	if *sigPath != "" && ring.Len() == 0 {
		_, _ = fmt.Fprintln(c.stderr, "monky-deployd verify: --sig needs --key")
		return exitUsage
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd verify: %v\n", err)
		return exitUsage
	}
	defer func() { _ = f.Close() }() // read-only
	exp := bundle.Expect{EnvID: *env, SHA: *sha, LiveSerial: *liveSerial, Rollback: *rollback}
	for _, svc := range strings.Split(*allow, ",") {
		// "web, worker" as an operator types it: the spaces are not part of the names.
		if svc = strings.TrimSpace(svc); svc != "" {
			exp.AllowPrivileged = append(exp.AllowPrivileged, svc)
		}
	}
	res, err := bundle.Verify(ctx, f, exp)
	var refused *bundle.RefusedError
	if err != nil && !errors.As(err, &refused) {
		_, _ = fmt.Fprintf(c.stderr, "monky-deployd verify: %v\n", err)
		return deployd.ExitFailed
	}
	out := verifyJSON{Refusals: []bundle.Refusal{}, Warnings: []string{}}
	if res != nil {
		out.SHA = res.SHA
		if res.Refusals != nil {
			out.Refusals = res.Refusals
		}
		if res.Warnings != nil {
			out.Warnings = res.Warnings
		}
	}
	if ring.Len() > 0 {
		if code := c.checkSignature(ring, cmp.Or(*sigPath, fs.Arg(0)+".sig"), *sigPath != "", *env, res, &out); code != 0 {
			return code
		}
	}
	if code := c.output(verifyText(out, *asJSON)); code != 0 {
		return code
	}
	if len(out.Refusals) > 0 {
		return deployd.ExitFailed
	}
	return 0
}

// verifyText is what verify prints of out: its JSON, or the verdict, the refusals,
// the signature line and compose's warnings as text.
func verifyText(out verifyJSON, asJSON bool) string {
	if asJSON {
		data, _ := json.Marshal(out)
		return string(data) + "\n"
	}
	var text strings.Builder
	switch {
	case len(out.Refusals) == 0:
		fmt.Fprintf(&text, "accepted %s\n", out.SHA)
	case out.SHA == "":
		// Not even a tar: there is no sha to name.
		text.WriteString("refused\n")
		writeRefusals(&text, out.Refusals)
	default:
		fmt.Fprintf(&text, "refused %s\n", out.SHA)
		writeRefusals(&text, out.Refusals)
	}
	if out.Signature != nil {
		text.WriteString(signatureLine(out.Signature))
	}
	for _, w := range out.Warnings {
		fmt.Fprintf(&text, "warning: %s\n", w)
	}
	return text.String()
}
