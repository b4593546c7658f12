//go:build unix

package compose

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// killProcessGroup starts docker in a process group of its own and returns what kills
// the whole group: docker runs compose as a plugin child process, which killing docker
// alone would leave running. run makes it the command's Cancel.
func killProcessGroup(cmd *exec.Cmd) func() error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}

// signalOf names the signal that ended a process that did not exit by itself, e.g.
// "signal 9 (killed)"; "" when it exited.
func signalOf(st *os.ProcessState) string {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	return fmt.Sprintf("signal %d (%s)", int(ws.Signal()), ws.Signal())
}
