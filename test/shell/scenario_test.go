package shell

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// goDir is the directory of the go tool that runs the test (go test puts it first on
// PATH), for the script's go build.
func goDir(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go tool on PATH for the scenario's go build: %v", err)
	}
	return filepath.Dir(p)
}

// TestScenario runs scenario.sh to its end: apply with a secret, idle, an unhealthy
// release restored, down. It fails with the script's output when the script does.
func TestScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("the shell scenario builds three binaries and runs the agent five times; run without -short (or bash test/shell/scenario.sh)")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the shell scenario needs curl: apt-get install curl")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scenario.sh")
	cmd.Env = append(os.Environ(), "PATH="+goDir(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// A process group of its own, killed whole when the test times out: the fakes it
	// starts stop when its descriptors close, and those close with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scenario.sh failed after %s: %v\n%s", time.Since(start).Round(time.Millisecond), err, out)
	}
	if !strings.HasSuffix(strings.TrimSpace(string(out)), "scenario passed") {
		t.Fatalf("scenario.sh exited 0 without passing:\n%s", out)
	}
	t.Logf("scenario.sh passed in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
}

// TestScenarioScript: the script parses (bash -n) and shellcheck finds nothing in it.
func TestScenarioScript(t *testing.T) {
	if out, err := exec.CommandContext(t.Context(), "bash", "-n", "scenario.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n scenario.sh: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("shellcheck is not installed (apt-get install shellcheck); CI runs it in packaging/check.sh")
	}
	if out, err := exec.CommandContext(t.Context(), "shellcheck", "scenario.sh").CombinedOutput(); err != nil {
		t.Fatalf("shellcheck scenario.sh: %v\n%s", err, out)
	}
}
