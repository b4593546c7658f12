package testbox

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStat is what /proc says about a process: its resident set in MiB, its threads
// and its open file descriptors.
type ProcStat struct {
	// RSSMiB is the whole resident set (VmRSS): with the pages of the executable, which
	// grow as code paths run for the first time.
	RSSMiB float64
	// AnonMiB is the resident anonymous memory (RssAnon): the heap, the stacks, what
	// a leak grows.
	AnonMiB float64
	Threads int
	FDs     int
}

// ReadProc reads the ProcStat of pid; an error for a process that has ended, is a
// zombie, or shows no VmRSS.
func ReadProc(pid int) (ProcStat, error) {
	var st ProcStat
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.Atoi(fields[0])
		switch k {
		case "VmRSS":
			st.RSSMiB = float64(n) / 1024
		case "RssAnon":
			st.AnonMiB = float64(n) / 1024
		case "Threads":
			st.Threads = n
		case "State":
			if fields[0] == "Z" {
				return st, fmt.Errorf("process %d is a zombie", pid)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return st, err
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return st, err
	}
	st.FDs = len(ents)
	if st.RSSMiB == 0 {
		return st, fmt.Errorf("process %d: no VmRSS", pid)
	}
	return st, nil
}
