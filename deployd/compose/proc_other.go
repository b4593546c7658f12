//go:build !unix

package compose

import (
	"os"
	"os/exec"
)

// killProcessGroup kills docker itself: there is no process group to kill.
func killProcessGroup(cmd *exec.Cmd) func() error {
	return func() error { return cmd.Process.Kill() }
}

// signalOf is "": no signals here.
func signalOf(*os.ProcessState) string { return "" }
