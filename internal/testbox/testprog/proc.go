package testprog

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Result is one finished run of a program.
type Result struct {
	// Code is the exit code; -N when signal N ended the program.
	Code int
	// Stdout and Stderr are what the program printed.
	Stdout, Stderr string
	// Elapsed is the wall time from start to end.
	Elapsed time.Duration
}

// Output is Stdout followed by Stderr.
func (r Result) Output() string { return r.Stdout + r.Stderr }

// Proc is a started run of a program, in a process group of its own so that a kill
// reaches its children too, as systemd's KillMode=control-group does.
type Proc struct {
	// Cmd is the running command.
	Cmd *exec.Cmd
	// Stdout and Stderr receive what the program prints.
	Stdout, Stderr *SyncBuffer

	done  chan struct{}
	res   Result
	start time.Time
}

// Start starts the program bin with args in dir, with exactly the environment env.
// tb.Cleanup kills a run that is still going.
func Start(tb testing.TB, bin, dir string, env []string, args ...string) *Proc {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{Cmd: cmd, Stdout: &SyncBuffer{}, Stderr: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testprog: start %s: %v", bin, err)
	}
	go func() {
		_ = cmd.Wait()
		p.res = Result{Code: cmd.ProcessState.ExitCode(), Stdout: p.Stdout.String(), Stderr: p.Stderr.String(),
			Elapsed: time.Since(p.start)}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.Code = -int(ws.Signal())
		}
		close(p.done)
	}()
	tb.Cleanup(func() { p.Kill() })
	return p
}

// Output is what the run printed so far: its stdout, then its stderr.
func (p *Proc) Output() string { return p.Stdout.String() + p.Stderr.String() }

// Done is closed when the run has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the run to end (at most d, then it kills the run and fails tb) and
// returns its result.
func (p *Proc) Wait(tb testing.TB, d time.Duration) Result {
	tb.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(d):
		res := p.Kill()
		tb.Fatalf("the run did not end within %s; stdout:\n%s\nstderr:\n%s", d, res.Stdout, res.Stderr)
		return res
	}
}

// Kill sends SIGKILL to the run's whole process group, unless it has ended, waits for
// it to end and returns its result.
func (p *Proc) Kill() Result {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return p.res
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// WaitFor polls cond every 5ms until it holds, or fails tb when d passes first.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
