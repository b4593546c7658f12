package deployd

import (
	"fmt"
	"strings"
	"time"
)

// HookProgress is what the box did of the hooks of one release's apply, kept in
// state.json so that a run killed in a hook knows it at the next tick: the hooks
// done, the one running, and the output of each run. A report closes it (the deploy
// ended); the next apply of that sha starts anew.
type HookProgress struct {
	// SHA is the release whose hooks these are.
	SHA string `json:"sha"`
	// Done are the hooks that succeeded, as "phase/service": not run again within
	// this apply, a resumed one included.
	Done []string `json:"done,omitempty"`
	// Running is the hook that was started and has not ended; at the next tick it
	// is a hook a crash interrupted.
	Running *RunningHook `json:"running,omitempty"`
	// Runs are the hook runs of this apply, with their redacted, bounded output.
	Runs []HookRun `json:"runs,omitempty"`
	// Closed is set by the report that ended the apply.
	Closed bool `json:"closed,omitempty"`
}

// RunningHook is a hook started and not yet ended.
type RunningHook struct {
	Phase     string    `json:"phase"`
	Service   string    `json:"service"`
	Container string    `json:"container"`
	Since     time.Time `json:"since"`
}

// HookRun is one run of a hook and how it ended.
type HookRun struct {
	Phase   string    `json:"phase"`
	Service string    `json:"service"`
	At      time.Time `json:"at"`
	// Exit is the hook's exit code; -1 when it did not exit by itself.
	Exit int `json:"exit"`
	// Result is "ok", "failed", "later" or "timeout".
	Result string `json:"result"`
	// Output is the end of what it printed, redacted and bounded.
	Output string `json:"output,omitempty"`
}

// lines are the hook runs of p as status prints them, one a line.
func (p *HookProgress) lines() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, r := range p.Runs {
		s := fmt.Sprintf("%s %s at %s: %s (exit %d)", r.Phase, r.Service, r.At.UTC().Format(time.RFC3339), r.Result, r.Exit)
		if o := strings.TrimSpace(r.Output); o != "" {
			s += ": " + lastLine(o)
		}
		out = append(out, s)
	}
	if r := p.Running; r != nil {
		out = append(out, fmt.Sprintf("%s %s started at %s and has not ended (a crash interrupted it, or it runs now)", r.Phase, r.Service, r.Since.UTC().Format(time.RFC3339)))
	}
	return out
}

// lastLine is the last line of s.
func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
