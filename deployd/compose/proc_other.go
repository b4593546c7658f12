//go:build !unix

package compose

import "os/exec"

// killProcessGroup leaves the default: cancellation kills docker itself.
func killProcessGroup(*exec.Cmd) {}
