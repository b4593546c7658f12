package compose

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxHolders bounds how many holders of docker's output a log line names.
const maxHolders = 8

// pipeHolders names the processes other than the agent that hold one of pipes open
// ("pid 4242 (sleep)"), read from /proc: each /proc/<pid>/fd link to the pipe's inode.
// Processes whose fds the agent may not read are not seen; nil when none is.
func pipeHolders(pipes []*os.File) []string {
	want := map[string]bool{}
	for _, f := range pipes {
		fi, err := f.Stat()
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			want[fmt.Sprintf("pipe:[%d]", st.Ino)] = true
		}
	}
	procs, err := os.ReadDir("/proc")
	if len(want) == 0 || err != nil {
		return nil
	}
	self := os.Getpid()
	var holders []string
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		if holds(pid, want) {
			holders = append(holders, fmt.Sprintf("pid %d (%s)", pid, procName(pid)))
			if len(holders) == maxHolders {
				break
			}
		}
	}
	return holders
}

// holds reports whether process pid has one of the links of want among its fds.
func holds(pid int, want map[string]bool) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && want[link] {
			return true
		}
	}
	return false
}

// procName is the command name of pid (/proc/<pid>/comm: the program's name, never its
// arguments, which may hold what a log must not), "?" when it cannot be read.
func procName(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
