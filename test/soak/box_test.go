package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/internal/testbox"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestMain removes the agent binary the soak built.
func TestMain(m *testing.M) { os.Exit(testprog.Run(m)) }

// buildAgent builds cmd/monky-deployd as shipped (CGO off, -trimpath).
func buildAgent(t *testing.T) string {
	t.Helper()
	return testprog.Build(t, testprog.AgentPkg, "-trimpath")
}

// box is one environment's box: a testbox.Box on the soak's shared fakes (its
// directories, config, grant and fake docker), and the agent's metrics file.
type box struct {
	*testbox.Box
	metrics string
}

// newBox builds the box of env on the fakes s. tenancy.timeout 2s: a held call (the
// delay faults) times out within the soak's pace; health_timeout 10s: a slow ps cannot
// hold a tick for minutes.
func newBox(t *testing.T, s *fakestack.Stack, env string) *box {
	t.Helper()
	b := &box{Box: testbox.New(t, testbox.Options{Env: env, SharedStack: s, Config: func(c *deployd.Config) {
		c.Tenancy.Timeout = deployd.Duration(2 * time.Second)
		c.Compose.Project = "soak"
		c.Compose.HealthTimeout = deployd.Duration(10 * time.Second)
		c.Compose.KeepReleases = 3
	}})}
	b.metrics = filepath.Join(b.Dir, "monky-deployd.prom")
	return b
}

// procEnv is the environment of the box's agents (testbox's: DOCKER_HOST names the
// box's fake engine, where the agent reads container state as the fake docker program
// it runs changes it), with HOME the box's directory.
func (b *box) procEnv() []string { return b.ProcEnv("HOME=" + b.Dir) }

// status runs `monky-deployd status` and `status --json` on the box, for the canary
// scan; their exit codes are part of the CLI contract too: the verdict, 0 ok,
// 1 warning, 2 critical (3, unknown, is a config status cannot read: a failure here).
func (b *box) status(ctx context.Context, bin string) (string, error) {
	var all bytes.Buffer
	for _, args := range [][]string{{"status", "--config", b.CfgPath}, {"status", "--json", "--config", b.CfgPath}} {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = b.procEnv()
		out, err := cmd.CombinedOutput()
		all.Write(out)
		// 1 and 2 are status's words for a box that is not ok (a soak injects
		// faults); anything else is a failure of the command.
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || exit.ExitCode() < 1 || exit.ExitCode() > 2) {
			return all.String(), fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
	}
	return all.String(), nil
}

// proc is one run of the agent binary.
type proc struct {
	gen     int
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	done    chan struct{}
	state   *os.ProcessState
}

// binaryAgent is the agent binary under `run --loop`, restarted by the soak.
type binaryAgent struct {
	bin      string
	box      *box
	interval time.Duration
	logDir   string

	mu   sync.Mutex
	cur  *proc
	gens int
}

func (a *binaryAgent) start() (*proc, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	gen := a.gens
	a.gens++
	f, err := os.Create(filepath.Join(a.logDir, fmt.Sprintf("agent-%03d.log", gen)))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(a.bin, "run", "--loop", "--interval", a.interval.String(),
		"--config", a.box.CfgPath, "--metrics-file", a.box.metrics)
	cmd.Env = a.box.procEnv()
	cmd.Dir = a.box.Dir
	cmd.Stdout, cmd.Stderr = f, f
	// its own process group (SIGKILL takes its docker children too); killed with the
	// test process if that dies first (a -timeout panic runs no cleanup)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	p := &proc{gen: gen, cmd: cmd, log: f, started: time.Now(), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		_ = f.Close()
		close(p.done)
	}()
	a.cur = p
	return p, nil
}

// current returns the running process, nil between a stop and the next start.
func (a *binaryAgent) current() *proc {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}

func (a *binaryAgent) clear() {
	a.mu.Lock()
	a.cur = nil
	a.mu.Unlock()
}

// stop ends p with SIGTERM to the agent alone (what systemd's KillMode=mixed sends
// first) or SIGKILL to its process group (the agent and its docker children, what
// systemd sends after TimeoutStopSec), and waits for it, at most grace. It returns
// the exit code (-1 for a signal death) and whether it ended in time.
func stop(p *proc, kill bool, grace time.Duration) (int, bool) {
	pid := p.cmd.Process.Pid
	if kill {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	} else {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	select {
	case <-p.done:
		return p.state.ExitCode(), true
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
		return p.state.ExitCode(), false
	}
}

// tickLine matches the binary's log line of a finished tick (cmd/monky-deployd, tick).
var tickLine = regexp.MustCompile(`msg="tick (?:done|ended on a temporary condition; the next tick retries|failed)".* leased=(true|false) .*exit=(-?\d+)`)

// tickCounts counts the ticks of the binary's logs by exit code, and the leased ones.
func tickCounts(logs string) (map[int]int, int) {
	codes := map[int]int{}
	leased := 0
	for _, m := range tickLine.FindAllStringSubmatch(logs, -1) {
		code, _ := strconv.Atoi(m[2])
		codes[code]++
		if m[1] == "true" {
			leased++
		}
	}
	return codes, leased
}

// inprocAgent is deployd.Agent.Loop in the test process.
type inprocAgent struct {
	box      *box
	interval time.Duration
	logger   *slog.Logger

	mu     sync.Mutex
	codes  map[int]int
	leased int
	gens   int
}

// tick is the loop's tick: Agent.Tick mapped with ExitCode, counted.
func (a *inprocAgent) tick(ag *deployd.Agent) func(context.Context) int {
	return func(ctx context.Context) int {
		out, err := ag.Tick(ctx)
		code := deployd.ExitCode(err)
		a.mu.Lock()
		a.codes[code]++
		if out.Leased {
			a.leased++
		}
		a.mu.Unlock()
		return code
	}
}

// run keeps a loop running until ctx ends, rebuilding the agent after each pause
// drawn by next. A loop that ends by itself, or with a code other than 0 when its
// context ends, is reported through fail.
func (a *inprocAgent) run(ctx context.Context, next func() time.Duration, fail func(string, ...any)) {
	cfg, err := deployd.LoadConfig(a.box.CfgPath)
	if err != nil {
		fail("in-process agent: config: %v", err)
		return
	}
	for ctx.Err() == nil {
		a.mu.Lock()
		a.gens++
		a.mu.Unlock()
		// Agent.Close closes the tenancy transport but not the OpenBao client's idle
		// connection, which lingers until its 90s idle timeout (two goroutines and an
		// fd per rebuilt agent; a binary's exit closes it). The soak gives the agent an
		// OpenBao transport of its own, as the client builds it, and closes it after
		// Close, so that rebuilds every few seconds in a short run do not read as growth.
		baoTr := &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConns: 4, IdleConnTimeout: 90 * time.Second}
		ag, err := deployd.New(ctx, cfg, deployd.Options{
			Logger:    a.logger,
			DockerEnv: deployd.DockerEnv(a.box.procEnv()),
			Hostname:  "soak-inproc",
			BaoHTTP:   &http.Client{Transport: baoTr},
		})
		if err != nil {
			fail("in-process agent: New: %v", err)
			return
		}
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan int, 1)
		go func() { done <- ag.Loop(lctx, deployd.LoopOptions{Interval: a.interval, Tick: a.tick(ag)}) }()
		ended := false
		select {
		case code := <-done:
			ended = true
			fail("in-process loop ended by itself with %d", code)
		case <-ctx.Done():
		case <-time.After(next()):
		}
		cancel()
		if !ended {
			select {
			case code := <-done:
				if code != deployd.ExitOK {
					fail("in-process loop ended with %d on a cancelled context, want 0", code)
				}
			case <-time.After(30 * time.Second):
				fail("in-process loop did not end within 30s of its context")
				return
			}
		}
		if err := ag.Close(); err != nil {
			fail("in-process agent: Close: %v", err)
		}
		baoTr.CloseIdleConnections()
	}
}
