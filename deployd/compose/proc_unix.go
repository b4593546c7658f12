//go:build unix

package compose

import (
	"os/exec"
	"syscall"
)

// killProcessGroup starts docker in a process group of its own and makes context
// cancellation kill the whole group: docker runs compose as a plugin child process,
// which killing docker alone would leave running.
func killProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}
