package deployd

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/codes"
)

// Text is the status for a person: the verdict and its headline on the first line,
// each problem with its next step, then what the box serves and remembers. Names that
// come from docker are printed without control characters.
func (v Status) Text() string {
	var w strings.Builder
	p := func(k string, val any) { fmt.Fprintf(&w, "%-14s %s\n", printable(k+":"), printable(fmt.Sprint(val))) }
	p("status", v.Headline)
	p("env", v.EnvID)
	p("agent", v.Version)
	for _, pr := range v.Problems {
		p("problem", "["+string(pr.Level)+"] "+pr.Problem)
		p("next step", pr.NextStep)
	}
	if v.Error != "" {
		p("state dir", stateDirLine(v.StateDir))
		p("token", tokenLine(v.Token))
		return w.String()
	}
	if v.Live == nil {
		p("live", "none")
	} else {
		p("live", fmt.Sprintf("%s (serial %d, healthy confirmed: %t)", v.Live.SHA, v.Live.Serial, v.Live.Confirmed))
		if h := v.Live.Health; h != nil {
			p("live health", liveLine(*h))
			for _, sv := range h.Services {
				p("  "+sv.Name, serviceLine(sv))
			}
		}
	}
	p("last check-in", timeOrNever(v.LastCheckin))
	if o := v.Offline; o != nil {
		p("tenancy", offlineLine(*o))
	}
	if r := v.LastReport; r != nil {
		p("last result", strings.TrimSpace(r.Result+" "+string(r.Code)))
		if r.Detail != "" {
			p("last detail", r.Detail)
		}
	}
	if r := v.LastRestore; r != nil {
		p("last restore", restoreLine(*r))
	}
	if r := v.LastReclaim; r != nil {
		p("images", Reclaim{Images: r.Images, Bytes: r.Bytes, Failed: r.Failed}.String()+" at "+r.At.Format(time.RFC3339))
	}
	switch r := v.LastRun; {
	case r == nil:
		p("last run", "never")
	case r.Code != "":
		p("last run", fmt.Sprintf("%s (exit %d, %s)", r.At.Format(time.RFC3339), r.Exit, r.Code))
	default:
		p("last run", fmt.Sprintf("%s (exit %d)", r.At.Format(time.RFC3339), r.Exit))
	}
	if c := v.Condition; c != nil {
		p("condition", conditionLine(*c))
		if c.Detail != "" {
			p("  detail", c.Detail)
		}
	} else {
		p("condition", "none: the last run ended 0")
	}
	if f := v.LastFailure; f != nil {
		code := string(f.Code)
		if code == "" {
			code = "a code not recorded (see the journal's tick line)"
		}
		p("last failure", fmt.Sprintf("%s at %s (exit %d)", code, f.At.Format(time.RFC3339), f.Exit))
	}
	if r := v.Rebuilt; r != nil {
		p("rebuilt", fmt.Sprintf("at %s: %s; restored %s", r.At.Format(time.RFC3339), r.Why, r.Kept))
	}
	p("token", tokenLine(v.Token))
	if v.Token.Expires != nil {
		p("token expires", v.Token.Expires.Format(time.RFC3339))
	}
	p("state dir", stateDirLine(v.StateDir))
	p("signatures", signaturesLine(v.Signatures))
	switch l := v.Latch; {
	case l != nil && !l.Active:
		// The next run clears it: the config's env_id is not the one latched.
		p("latch", fmt.Sprintf("none (the AGENT_ENV_MISMATCH latch of %s clears at the next run: env_id changed)", l.EnvID))
	case l != nil:
		p("latch", fmt.Sprintf("AGENT_ENV_MISMATCH since %s: runs exit 78 until env_id changes or you bootstrap", l.Since.Format(time.RFC3339)))
	default:
		p("latch", "none")
	}
	for _, f := range v.FailedSHAs {
		p("failed sha", failedLine(f))
		if f.Evidence == "" {
			continue
		}
		key := "  evidence:"
		for _, line := range strings.Split(strings.TrimRight(f.Evidence, "\n"), "\n") {
			fmt.Fprintf(&w, "%-14s %s\n", key, printable(line))
			key = ""
		}
	}
	return w.String()
}

// conditionLine is what status says of the condition.
func conditionLine(c StatusCondition) string {
	s := fmt.Sprintf("%s (exit %d) since %s, %s", c.Code, c.Exit, c.CodeSince.Format(time.RFC3339), plural(c.Runs, "run"))
	if c.Since.Before(c.CodeSince) {
		s += "; not ok since " + c.Since.Format(time.RFC3339)
	}
	if c.SHA != "" {
		s += "; sha " + c.SHA
	}
	if c.NextAttempt != nil {
		s += "; next attempt " + c.NextAttempt.Format(time.RFC3339)
	}
	return s
}

// failedLine is one failed sha.
func failedLine(f StatusFailed) string {
	s := fmt.Sprintf("%s serial %d %s", f.SHA, f.Serial, f.Code)
	if f.Until != nil {
		s += " (tried again at " + f.Until.Format(time.RFC3339) + ")"
	}
	return s
}

// stateDirLine is what status says of the state dir.
func stateDirLine(d StatusStateDir) string {
	switch {
	case d.Problem != "":
		return "CANNOT TAKE THE STATE: " + d.Problem
	case d.FreeKiB >= 0:
		return fmt.Sprintf("%s, writable, %s free", d.Path, mib(d.FreeKiB<<10))
	}
	return d.Path + ", writable"
}

// signaturesLine is what status says of bundle signatures.
func signaturesLine(v StatusSignatures) string {
	if !v.Required {
		return "not required (no trusted_keys): bundles are not signed"
	}
	return "required, trusted keys " + strings.Join(v.Keys, ", ")
}

// tokenLine is what status says of the token.
func tokenLine(t StatusToken) string {
	switch t.State {
	case TokenRefused:
		return "present, but the last run ended " + string(codes.Unauthenticated)
	case TokenExpired:
		return "present, but expired (as last looked up)"
	case TokenCorrupt, TokenUnreadable:
		return t.State + ": " + t.Detail
	default:
		return t.State
	}
}

// restoreLine is what status says of the last restore, with what to do next.
func restoreLine(r StatusRestore) string {
	at := r.At.Format(time.RFC3339)
	switch r.Result {
	case RestoreHealthy:
		return fmt.Sprintf("%s at %s: the previous release %s is live and healthy", r.Result, at, r.SHA)
	case RestoreNone:
		return fmt.Sprintf("%s at %s: there was no previous release; the failed one was taken down", r.Result, at)
	default:
		return fmt.Sprintf("%s at %s: the previous release %s is not healthy (%s): the box is degraded; look with `docker compose ps --all` in the current directory",
			r.Result, at, r.SHA, r.Detail)
	}
}

// liveLine is what status says of the live release's health at the last check-in.
func liveLine(h StatusHealth) string {
	at := h.ObservedAt.Format(time.RFC3339)
	switch {
	case h.Reason != "":
		return fmt.Sprintf("unknown at %s: %s", at, h.Reason)
	case h.Healthy:
		return "healthy at " + at
	default:
		return fmt.Sprintf("UNHEALTHY at %s: the agent changes nothing on its own; read the logs with `docker compose logs` in the current directory", at)
	}
}

// printable replaces control characters with "?": service names and states come from
// docker labels and must not drive the operator's terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

func timeOrNever(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}
