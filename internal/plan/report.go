package plan

import (
	"fmt"
	"strings"

	"github.com/monky/monky-deployd/internal/release"
)

// Release names a release in a report.
type Release struct {
	SHA    string `json:"sha"`
	Serial int64  `json:"serial"`
}

// Summary counts the services by change.
type Summary struct {
	Added     int `json:"added"`
	Removed   int `json:"removed"`
	Recreated int `json:"recreated"`
	Scaled    int `json:"scaled"`
	Kept      int `json:"kept"`
}

// Refusal is one refusal of the bundle: a stable code and a detail that names files,
// variables and services, never a value.
type Refusal struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Report is a whole plan, as `monky-deployd plan --json` prints it (docs/PLAN.md).
type Report struct {
	Schema int    `json:"schema"`
	EnvID  string `json:"env_id"`
	// Action is tenancy's action at the check-in: apply, none or down.
	Action string `json:"action"`
	// Live is the release the box serves; nil when it serves none.
	Live *Release `json:"live"`
	// Target is the release tenancy asks for with apply; nil with none and down.
	Target *Release `json:"target"`
	// Changes is true when an apply (or the down) would change a container.
	Changes  bool      `json:"changes"`
	Summary  Summary   `json:"summary"`
	Services []Service `json:"services"`
	// Refusals are why the bundle would be refused; the plan then lists no service.
	Refusals []Refusal `json:"refusals"`
	// Notes are what else the operator should know (networks, volumes, what plan
	// cannot see).
	Notes []string `json:"notes"`
	// Next is what to do next, one sentence.
	Next string `json:"next"`
}

// Finish fills Summary and Changes from Services and makes the lists non-nil.
func (r *Report) Finish() {
	r.Schema = Schema
	r.Summary = Summary{}
	r.Changes = false
	for _, s := range r.Services {
		switch s.Change {
		case Added:
			r.Summary.Added++
		case Removed:
			r.Summary.Removed++
		case Recreated:
			r.Summary.Recreated++
		case Scaled:
			r.Summary.Scaled++
		case Kept:
			r.Summary.Kept++
		}
		if s.Change != Kept {
			r.Changes = true
		}
	}
	if r.Services == nil {
		r.Services = []Service{}
	}
	if r.Refusals == nil {
		r.Refusals = []Refusal{}
	}
	if r.Notes == nil {
		r.Notes = []string{}
	}
}

// marks are the first column of a service line.
var marks = map[Change]string{Added: "+", Removed: "-", Recreated: "~", Scaled: "^", Kept: "="}

// Text is the report for an operator: what tenancy asks, one line per service, a
// summary, the notes and what to do next.
func Text(r Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for %s: %s\n", r.EnvID, headline(r))
	if len(r.Refusals) > 0 {
		fmt.Fprintf(&b, "REFUSED: an apply would refuse this bundle before the lease and change nothing:\n")
		for _, f := range r.Refusals {
			fmt.Fprintf(&b, "  %s: %s\n", f.Code, f.Detail)
		}
	}
	width := 0
	for _, s := range r.Services {
		width = max(width, len(s.Name))
	}
	for _, s := range r.Services {
		line := fmt.Sprintf("  %s %-*s  %s", marks[s.Change], width, s.Name, s.Change)
		if len(s.Reasons) > 0 {
			texts := make([]string, len(s.Reasons))
			for i, rs := range s.Reasons {
				texts[i] = rs.Text
			}
			line += ": " + strings.Join(texts, "; ")
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	if len(r.Refusals) == 0 {
		s := r.Summary
		fmt.Fprintf(&b, "summary: %d added, %d removed, %d recreated, %d scaled, %d kept\n", s.Added, s.Removed, s.Recreated, s.Scaled, s.Kept)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if r.Next != "" {
		fmt.Fprintf(&b, "next: %s\n", r.Next)
	}
	return b.String()
}

func headline(r Report) string {
	live := "nothing is live"
	if r.Live != nil {
		live = "live " + release.Short(r.Live.SHA) + fmt.Sprintf(" (serial %d)", r.Live.Serial)
	}
	switch {
	case r.Action == "down":
		return "tenancy asks for down; " + live
	case r.Target == nil:
		return "tenancy asks for nothing (" + r.Action + "); " + live
	default:
		return fmt.Sprintf("tenancy asks to apply %s (serial %d); %s", release.Short(r.Target.SHA), r.Target.Serial, live)
	}
}
