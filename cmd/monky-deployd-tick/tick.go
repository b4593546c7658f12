package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/composeplugin"
	"github.com/monky/monky-deployd/internal/config"
	"github.com/monky/monky-deployd/internal/contract"
	"github.com/monky/monky-deployd/internal/engine"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/heartbeat"
	"github.com/monky/monky-deployd/internal/layout"
	"github.com/monky/monky-deployd/internal/logging"
	"github.com/monky/monky-deployd/internal/metrics"
	"github.com/monky/monky-deployd/internal/state"
	"github.com/monky/monky-deployd/internal/transport"
)

// agentName is the full agent's binary, looked for next to this one.
const agentName = "monky-deployd"

// result is how a tick ended: an exit code (with the check-in's action, and a
// failure's code and error), or why the full agent takes it over.
type result struct {
	exit     int
	action   string
	code     codes.Code
	err      error
	handover string
	log      *slog.Logger
}

// handedOver is a result that hands the tick to the full agent, for why.
func handedOver(log *slog.Logger, why string) result {
	return result{handover: why, log: log}
}

// box is one tick's world: the config, the state it read, and how it logs.
type box struct {
	cfg     config.Config
	env     map[string]string
	environ []string
	log     *slog.Logger
	red     *secret.Redactor
	start   time.Time
}

// tick runs `run` when it is a steady-state idle tick; anything else is handed over
// before tenancy is called, or after a check-in that asked for more than none. A tick
// stopped by a signal is never handed over: it ends with 75, as the agent's would.
func tick(ctx context.Context, args, environ []string, stderr io.Writer) result {
	b := &box{environ: environ, env: envMap(environ), red: secret.NewRedactor(), start: time.Now()}
	b.log = logging.ForAgent(stderr, b.env, b.red.Handler)
	r := b.run(ctx, args)
	if r.handover != "" && ctx.Err() != nil {
		b.log.Warn("the tick was stopped mid-way; exiting 75, the next tick resumes", "err", ctx.Err(), "exit", contract.ExitTemporary)
		return result{exit: contract.ExitTemporary}
	}
	return r
}

// run is tick after the logger.
func (b *box) run(ctx context.Context, args []string) result {
	configPath, metricsFile, ok := parseRun(args)
	if !ok {
		return handedOver(b.log, "a command or flag the full agent runs")
	}
	cfg, err := config.LoadConfig(configPath)
	if err != nil {
		return handedOver(b.log, "the config does not load (the agent says why)")
	}
	b.cfg = cfg
	b.log = b.log.With("env_id", cfg.EnvID)
	if why := b.unsupported(); why != "" {
		return handedOver(b.log, why)
	}
	lock, err := fsutil.TryLock(cfg.LockPath())
	if err != nil {
		return handedOver(b.log, "the run lock cannot be taken here")
	}
	defer func() { _ = lock.Unlock() }()
	st, err := state.Read(cfg.StatePath(), cfg.EnvID)
	if err != nil {
		return handedOver(b.log, "state.json does not read")
	}
	if why := b.unsteady(&st, time.Now()); why != "" {
		return handedOver(b.log, why)
	}
	r := b.checkIn(ctx, &st)
	if r.handover != "" {
		return r
	}
	return b.finish(&st, r, metricsFile)
}

// unsupported names what of the config or the box this binary leaves to the agent.
func (b *box) unsupported() string {
	switch {
	case b.cfg.Tenancy.Transport != transport.TransportSystem && b.cfg.Tenancy.Transport != transport.TransportProxy:
		return "the " + b.cfg.Tenancy.Transport + " transport"
	case b.cfg.Compose.Docker == "docker" && !hasComposePlugin(b.env):
		return "no docker compose v2 (the agent says what to install)"
	}
	return ""
}

func hasComposePlugin(env map[string]string) bool {
	_, err := composeplugin.Find(composeplugin.Dirs(env, composeplugin.SystemDirs))
	return err == nil
}

// unsteady names what in st (or on disk) needs the agent: anything a tick of the
// agent would repair, renew, read or decide before its check-in.
func (b *box) unsteady(st *state.State, now time.Time) string {
	dirs := layout.Dirs{DeployDir: b.cfg.DeployDir}
	switch {
	case st.Schema != state.Schema || st.EnvID != b.cfg.EnvID:
		return "a state of another format or env_id"
	case st.EnvMismatch != nil:
		return "the AGENT_ENV_MISMATCH latch"
	case !dirs.Tidy() || dirs.Current() != st.LiveSHA:
		return "the release store needs a repair"
	case st.LiveSHA != "" && (!st.Confirmed || len(st.LiveServices) == 0):
		return "a live release not confirmed or without its services recorded"
	case now.Before(st.LastTick):
		// token_renew_at and token_expires are times of this clock: after it went
		// back they may lie too far ahead, and the agent's lookup sets them again.
		return "the clock went back since the last tick"
	case st.TokenRenewAt.IsZero() || !now.Before(st.TokenRenewAt) || st.TokenRenewAt.After(now.Add(contract.MaxLookupGap)):
		return "the OpenBao token is due for a lookup"
	case !st.TokenExpires.IsZero() && !now.Before(st.TokenExpires):
		return "the OpenBao token has expired"
	case !state.DockerVersionFresh(st, now):
		return "the docker version is due to be read again"
	}
	return ""
}

// checkIn reads the live release's health and checks in with st's token. It ends the
// tick on none (0) or on a temporary failure of tenancy (75); anything else is handed
// over.
func (b *box) checkIn(ctx context.Context, st *state.State) result {
	token, err := state.ReadToken(b.cfg.TokenPath())
	if err != nil || token == "" {
		return handedOver(b.log, "no OpenBao token")
	}
	b.red.Add(token)
	tc, err := transport.New(ctx, heartbeat.TransportConfig(b.cfg, b.log))
	if err != nil {
		return handedOver(b.log, "the tenancy transport does not build here")
	}
	defer func() { _ = tc.Close() }()
	bearer := secret.New(token)
	client, err := heartbeat.NewClient(b.cfg, tc.HTTP, func(context.Context) (secret.Value, error) { return bearer, nil }, b.red, b.log)
	if err != nil {
		return handedOver(b.log, "the tenancy client does not build here")
	}
	ec, err := engine.New(b.environ, engine.Options{Logger: b.log})
	if err != nil {
		return handedOver(b.log, "docker is read through the CLI ("+err.Error()+")")
	}
	defer func() { _ = ec.Close() }()

	st.Live = b.observe(ctx, ec, st)
	free, _ := fsutil.FreeMB(fsutil.ExistingParent(b.cfg.DeployDir))
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown" // as the agent sends it
	}
	req := heartbeat.Request(b.cfg.EnvID, contract.Version, st, tenancy.Host{Hostname: host, DockerVersion: st.DockerVersion, FreeMB: free})
	inst, err := heartbeat.Send(ctx, client, req, st, time.Now, b.log, b.red.Redact)
	if err != nil {
		code, ok := heartbeat.Temporary(b.log, "check-in", err)
		if !ok {
			return handedOver(b.log, "the check-in failed (the agent checks in again and says why)")
		}
		retry, _ := tenancy.RetryAfter(err)
		state.EndTick(st, time.Now(), contract.ExitTemporary, code, retry)
		return result{exit: contract.ExitTemporary, code: code, err: err}
	}
	if inst.Action != tenancy.ActionNone {
		return handedOver(b.log, "tenancy asked for "+string(inst.Action))
	}
	b.log.Debug("check-in: nothing to do", "live_sha", st.LiveSHA)
	state.EndTick(st, time.Now(), contract.ExitOK, "", 0)
	return result{exit: contract.ExitOK, action: string(inst.Action)}
}

// observe is the live release's health through the Engine API; nil when nothing is
// live.
func (b *box) observe(ctx context.Context, ec *engine.Client, st *state.State) *state.LiveHealth {
	if st.LiveSHA == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, state.LiveTimeout)
	defer cancel()
	at := time.Now()
	dirs := layout.Dirs{DeployDir: b.cfg.DeployDir}
	cc, err := compose.New(compose.Config{Docker: b.cfg.Compose.Docker, Project: b.cfg.Compose.Project,
		Dir: dirs.Dir(st.LiveSHA), Logger: b.log, Reader: ec})
	if err == nil {
		var obs compose.Observation
		if obs, err = cc.ObserveAfter(ctx, state.Observation(st.Live), st.LiveServices, st.LiveOneShots); err == nil {
			return state.Judge(b.log, st.LiveSHA, st.Live, obs, dirs.CurrentLink(), b.cfg.Compose.Project)
		}
	}
	return state.Unobserved(b.log, st.LiveSHA, at, b.red.Redact(err.Error()))
}

// finish saves st, writes the metrics and logs the tick's line, as the agent's run
// does after its tick: a state that cannot be saved fails the tick (exit 1,
// STATE_UNAVAILABLE), as it fails the agent's.
func (b *box) finish(st *state.State, r result, metricsFile string) result {
	if err := state.Save(b.cfg.StatePath(), b.cfg.EnvID, st, b.red.RedactBytes); err != nil {
		b.log.Error("could not save the state; the next tick rebuilds it from the live release", "err", err)
		if r.err == nil {
			r = result{exit: contract.ExitFailed, action: r.action, code: codes.StateUnavailable, err: err}
		}
	}
	took := time.Since(b.start)
	attrs := []any{"action", r.action, "result", "", "code", r.code, "sha", "", "serial", 0, "leased", false,
		"duration", took.Round(time.Millisecond), "exit", r.exit}
	switch r.exit {
	case contract.ExitOK:
		b.log.Info("tick done", attrs...)
	case contract.ExitTemporary:
		b.log.Warn("tick ended on a temporary condition; the next tick retries", append(attrs, "err", r.err)...)
	default:
		b.log.Error("tick failed", append(attrs, "err", r.err)...)
	}
	if metricsFile != "" {
		snap := metrics.FromState(*st, b.cfg.EnvID, contract.Version, time.Now(), took, r.exit)
		if err := metrics.Write(metricsFile, snap); err != nil {
			b.log.Warn("could not write the metrics file", "path", metricsFile, "err", err)
		}
	}
	return r
}

// parseRun accepts `run [--config PATH] [--metrics-file PATH]` and nothing else.
func parseRun(args []string) (configPath, metricsFile string, ok bool) {
	if len(args) == 0 || args[0] != "run" {
		return "", "", false
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cp := fs.String("config", config.DefaultConfigPath, "")
	mf := fs.String("metrics-file", "", "")
	if fs.Parse(args[1:]) != nil || fs.NArg() != 0 {
		return "", "", false
	}
	return *cp, *mf, true
}

func envMap(environ []string) map[string]string {
	m := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// handOver replaces this process with the full agent, given the same arguments and
// environment. It returns only when that fails: 1, with a line that says what to do.
func handOver(r result, argv, environ []string, stderr io.Writer) int {
	log := r.log
	if log == nil {
		log = slog.New(logging.NewHandler(stderr, logging.Options{}))
	}
	agent, err := agentPath()
	if err == nil {
		log.Debug("handing the tick to the full agent", "why", r.handover, "agent", agent)
		err = syscall.Exec(agent, append([]string{agent}, argv[1:]...), environ)
	}
	log.Error("could not hand the tick to the full agent; reinstall monky-deployd (both binaries, side by side)",
		"agent", agent, "why", r.handover, "err", err, "exit", contract.ExitFailed)
	return contract.ExitFailed
}

// agentPath is monky-deployd in this binary's directory.
func agentPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), agentName)
	fi, err := os.Stat(p)
	if err != nil {
		return p, err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return p, fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}
