package compose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// defaultWaitDelay is how long docker's output may stay open after docker exited (a
// child of docker holding it: a credential helper, a plugin, a slow box), and how long
// docker may take to die after the agent killed it. Past it the agent closes its end
// of the output and goes on with what it read; the exit status still decides.
const defaultWaitDelay = 5 * time.Second

// Stop says why a docker command did not exit by itself (Output.ExitCode -1).
type Stop string

// The ways a docker command that did not exit by itself ended.
const (
	// StopCancelled: the caller's context was cancelled (the agent was told to stop)
	// and the agent killed docker's process group. The error matches
	// context.Canceled.
	StopCancelled Stop = "cancelled"
	// StopDeadline: the deadline of the caller's context passed (a bound the agent
	// sets: a pull's 15 minutes, a read's 5 seconds) and the agent killed docker's
	// process group. The error matches ErrDockerTimeout and
	// context.DeadlineExceeded.
	StopDeadline Stop = "deadline"
	// StopSignal: a signal the agent did not send killed docker (the kernel's OOM
	// killer, an operator's kill). The error matches ErrDockerTimeout.
	StopSignal Stop = "signal"
)

// result is how one docker command ended, for the callers of run.
type result struct {
	// code is docker's exit code, -1 when it did not exit by itself or did not start.
	code int
	// stop says why it did not exit by itself; "" when it exited or did not start.
	stop Stop
	// lingered: docker's output was still open waitDelay after docker exited; the
	// agent closed it. heldBy names the processes that held it, when /proc tells.
	lingered bool
	heldBy   []string
	// err is nil for an exit 0, else what went wrong (see ending.result).
	err error
}

// ending is what the agent knows of a docker command once it is reaped: the facts
// that ending.result classifies, apart from the running so that a table test can
// hold each case.
type ending struct {
	// exited: docker exited by itself, with code.
	exited bool
	code   int
	// signal names the signal that ended docker when it did not exit by itself.
	signal string
	// killed: the agent killed docker's process group because ctx ended, with ctxErr.
	killed bool
	ctxErr error
	// waitErr is what exec's Wait returned (an *exec.ExitError for a non-zero exit).
	waitErr error
	// copyErr is a writer that refused docker's output (ps printing past its cap):
	// the agent stopped reading, and docker may have died of the closed pipe.
	copyErr error
	// lingered: the output stayed open waitDelay after docker exited; heldBy names
	// who held it; delay is waitDelay.
	lingered bool
	heldBy   []string
	delay    time.Duration
}

// result classifies e: the exit status decides. An exit 0 is a success, output that
// outlived it or not; a non-zero exit is that exit's failure; a command that did not
// exit by itself was killed by the agent because its ctx ended (cancelled: a
// context.Canceled error; a deadline: ErrDockerTimeout) or by a signal the agent did
// not send (ErrDockerTimeout).
func (e ending) result() result {
	r := result{code: -1, lingered: e.lingered, heldBy: e.heldBy}
	switch {
	case e.exited && e.code == 0:
		r.code, r.err = 0, e.copyErr
	case e.exited:
		r.code, r.err = e.code, e.exitErr()
	case e.killed && errors.Is(e.ctxErr, context.Canceled):
		r.stop, r.err = StopCancelled, fmt.Errorf("%w (docker was killed)", e.ctxErr)
	case e.killed:
		r.stop = StopDeadline
		r.err = fmt.Errorf("%w: docker did not finish within the bound the agent set for it, and was killed: %w", ErrDockerTimeout, e.ctxErr)
	case e.copyErr != nil:
		r.err = fmt.Errorf("the agent stopped reading docker's output: %w", e.copyErr)
	case e.signal != "":
		r.stop = StopSignal
		r.err = fmt.Errorf("%w: docker was killed by %s, which the agent did not send (the OOM killer? journalctl -k)", ErrDockerTimeout, e.signal)
	case e.waitErr != nil:
		r.err = e.waitErr
	default:
		r.err = errors.New("docker ended without an exit status")
	}
	return r
}

// exitErr is the error of a non-zero exit: Wait's, and whether the output outlived it.
func (e ending) exitErr() error {
	err := e.waitErr
	if err == nil {
		err = fmt.Errorf("exit status %d", e.code)
	}
	if e.lingered {
		return fmt.Errorf("%w; its output stayed open %s after it exited (held by %s); what was printed to it after that was not read",
			err, e.delay, heldBy(e.heldBy))
	}
	return err
}

// heldBy says who held docker's output.
func heldBy(holders []string) string {
	if len(holders) == 0 {
		return "a process /proc does not show to the agent, or none any more"
	}
	return strings.Join(holders, ", ")
}

// run runs docker with exactly c.env in c.dir, its output into stdout and stderr (the
// same writer gets both when they are equal), and says how it ended (ending.result).
// Output that outlives an exit 0 is logged, never a failure.
func (c *Client) run(ctx context.Context, args []string, stdout, stderr io.Writer) result {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: the bound the agent set for it passed before docker started: %w", ErrDockerTimeout, err)
		}
		return result{code: -1, err: err}
	}
	prog, err := lookPath(c.docker, c.env)
	if err != nil {
		return result{code: -1, err: err}
	}
	out, err := newOutputPipes(stdout, stderr)
	if err != nil {
		return result{code: -1, err: fmt.Errorf("the pipes of docker's output: %w", err)}
	}
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = out.childEnds()
	cmd.WaitDelay = c.waitDelay
	var killed atomic.Bool
	kill := killProcessGroup(cmd)
	cmd.Cancel = func() error {
		err := kill()
		if err == nil {
			killed.Store(true)
		}
		return err
	}
	c.log.Debug("running docker", "argv", args)
	if err := cmd.Start(); err != nil {
		out.abort()
		return result{code: -1, err: err}
	}
	out.started()
	waitErr := cmd.Wait()
	e := ending{waitErr: waitErr, killed: killed.Load(), ctxErr: ctx.Err(), delay: c.waitDelay}
	e.lingered, e.heldBy, e.copyErr = out.wait(c.waitDelay)
	if st := cmd.ProcessState; st != nil {
		e.exited, e.code, e.signal = st.Exited(), st.ExitCode(), signalOf(st)
	}
	r := e.result()
	if r.err == nil && r.lingered {
		c.log.Warn("docker exited 0, but its output stayed open after it exited, held by a child of docker; its exit status decides: the command succeeded, and the agent stopped reading its output. Nothing to do unless it repeats: then look at held_by (a credential helper or plugin that lingers) and at the box's load",
			"command", c.commandName(args), "waited", c.waitDelay, "held_by", heldBy(r.heldBy))
	}
	return r
}

// commandName is the docker command of args, for a log line: "docker compose up",
// "docker pull", "docker image inspect".
func (c *Client) commandName(args []string) string {
	switch {
	case len(args) > len(c.base) && args[0] == "compose":
		return "docker compose " + args[len(c.base)]
	case len(args) > 1 && args[0] == "image":
		return "docker image " + args[1]
	case len(args) > 0:
		return "docker " + args[0]
	}
	return "docker"
}

// outputPipes are the pipes of docker's stdout and stderr (one when both go to the
// same writer), read by the agent. The agent owns them, rather than letting os/exec
// make them, so that it can tell that the output outlived docker whatever docker's
// exit status, and who held it open.
type outputPipes struct {
	reads  []*os.File
	writes []*os.File
	dsts   []io.Writer
	closes []func() // each read end's close, once
	done   chan struct{}
	mu     sync.Mutex
	errs   []error
}

// newOutputPipes makes the pipes for stdout and stderr.
func newOutputPipes(stdout, stderr io.Writer) (*outputPipes, error) {
	p := &outputPipes{done: make(chan struct{})}
	dsts := []io.Writer{stdout}
	if !sameWriter(stdout, stderr) {
		dsts = append(dsts, stderr)
	}
	for _, w := range dsts {
		r, wr, err := os.Pipe()
		if err != nil {
			p.abort()
			return nil, err
		}
		p.reads, p.writes, p.dsts = append(p.reads, r), append(p.writes, wr), append(p.dsts, w)
		p.closes = append(p.closes, sync.OnceFunc(func() { _ = r.Close() }))
	}
	return p, nil
}

// sameWriter reports whether a and b are the same writer (os/exec's rule: an
// incomparable writer is never the same).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// childEnds are docker's stdout and stderr.
func (p *outputPipes) childEnds() (stdout, stderr *os.File) {
	return p.writes[0], p.writes[len(p.writes)-1]
}

// abort closes every end: docker did not start.
func (p *outputPipes) abort() {
	for _, f := range p.writes {
		_ = f.Close()
	}
	for _, c := range p.closes {
		c()
	}
}

// started closes the agent's copies of docker's ends (docker holds its own) and
// copies each read end to its writer until EOF. A writer that refuses closes its pipe,
// as os/exec does: docker then meets a closed pipe.
func (p *outputPipes) started() {
	for _, f := range p.writes {
		_ = f.Close()
	}
	var wg sync.WaitGroup
	for i, r := range p.reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := io.Copy(p.dsts[i], r)
			p.closes[i]()
			if err != nil && !errors.Is(err, os.ErrClosed) {
				p.mu.Lock()
				p.errs = append(p.errs, err)
				p.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(p.done) }()
}

// wait waits, once docker was reaped, up to delay for its output to end. When it does
// not, the output lingered: wait names the processes that hold it (before closing
// it, while they still do), closes the agent's ends and returns with what was read.
// When it sees no holder, the agent may only have been too busy to read what was
// left (a starved box): it waits one more delay for the end before it closes.
// copyErr is a writer's refusal.
func (p *outputPipes) wait(delay time.Duration) (lingered bool, holders []string, copyErr error) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		holders = pipeHolders(p.reads)
		if len(holders) == 0 {
			t.Reset(delay)
			select {
			case <-p.done:
			case <-t.C:
			}
		}
		select {
		case <-p.done:
		default:
			lingered = true
			for _, c := range p.closes {
				c()
			}
			<-p.done
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return lingered, holders, errors.Join(p.errs...)
}
