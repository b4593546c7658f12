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
	var w textLines
	w.p("status", v.Headline)
	w.p("env", v.EnvID)
	w.p("agent", v.Version)
	for _, pr := range v.Problems {
		w.p("problem", "["+string(pr.Level)+"] "+pr.Problem)
		w.p("next step", pr.NextStep)
	}
	if v.Error != "" {
		w.p("state dir", stateDirLine(v.StateDir))
		w.p("token", tokenLine(v.Token))
		return w.String()
	}
	v.liveText(&w)
	v.historyText(&w)
	v.boxText(&w)
	return w.String()
}

// textLines is status's text: one "key: value" line each, values made printable.
type textLines struct{ strings.Builder }

func (w *textLines) p(k string, val any) {
	fmt.Fprintf(w, "%-14s %s\n", printable(k+":"), printable(fmt.Sprint(val)))
}

// liveText is the live release and its health, service by service.
func (v Status) liveText(w *textLines) {
	if v.Live == nil {
		w.p("live", "none")
		return
	}
	w.p("live", fmt.Sprintf("%s (serial %d, healthy confirmed: %t)", v.Live.SHA, v.Live.Serial, v.Live.Confirmed))
	if h := v.Live.Health; h != nil {
		w.p("live health", liveLine(*h))
		for _, sv := range h.Services {
			w.p("  "+sv.Name, serviceLine(sv))
		}
	}
}

// historyText is what the box did last: check-in (and since when tenancy has not
// been reached), report, restore, reclaim, run, the condition, the last failure and
// a rebuilt state.
func (v Status) historyText(w *textLines) {
	w.p("last check-in", timeOrNever(v.LastCheckin))
	if o := v.Offline; o != nil {
		w.p("tenancy", offlineLine(*o))
	}
	if r := v.LastReport; r != nil {
		w.p("last result", strings.TrimSpace(r.Result+" "+string(r.Code)))
		if r.Detail != "" {
			w.p("last detail", r.Detail)
		}
	}
	if r := v.LastRestore; r != nil {
		w.p("last restore", restoreLine(*r))
	}
	for _, h := range v.Hooks {
		w.p("hook", h)
	}
	if r := v.LastReclaim; r != nil {
		w.p("images", Reclaim{Images: r.Images, Bytes: r.Bytes, Failed: r.Failed}.String()+" at "+r.At.Format(time.RFC3339))
	}
	switch r := v.LastRun; {
	case r == nil:
		w.p("last run", "never")
	case r.Code != "":
		w.p("last run", fmt.Sprintf("%s (exit %d, %s)", r.At.Format(time.RFC3339), r.Exit, r.Code))
	default:
		w.p("last run", fmt.Sprintf("%s (exit %d)", r.At.Format(time.RFC3339), r.Exit))
	}
	if c := v.Condition; c != nil {
		w.p("condition", conditionLine(*c))
		if c.Detail != "" {
			w.p("  detail", c.Detail)
		}
	} else {
		w.p("condition", "none: the last run ended 0")
	}
	if f := v.LastFailure; f != nil {
		code := string(f.Code)
		if code == "" {
			code = "a code not recorded (see the journal's tick line)"
		}
		w.p("last failure", fmt.Sprintf("%s at %s (exit %d)", code, f.At.Format(time.RFC3339), f.Exit))
	}
	if r := v.Rebuilt; r != nil {
		w.p("rebuilt", fmt.Sprintf("at %s: %s; restored %s", r.At.Format(time.RFC3339), r.Why, r.Kept))
	}
}

// boxText is the box's own standing: token, state dir, signatures, the latch and
// the shas it holds as failed, with their evidence.
func (v Status) boxText(w *textLines) {
	w.p("token", tokenLine(v.Token))
	if v.Token.Expires != nil {
		w.p("token expires", v.Token.Expires.Format(time.RFC3339))
	}
	w.p("state dir", stateDirLine(v.StateDir))
	w.p("signatures", signaturesLine(v.Signatures))
	switch l := v.Latch; {
	case l != nil && !l.Active:
		// The next run clears it: the config's env_id is not the one latched.
		w.p("latch", fmt.Sprintf("none (the AGENT_ENV_MISMATCH latch of %s clears at the next run: env_id changed)", l.EnvID))
	case l != nil:
		w.p("latch", fmt.Sprintf("AGENT_ENV_MISMATCH since %s: runs exit 78 until env_id changes or you bootstrap", l.Since.Format(time.RFC3339)))
	default:
		w.p("latch", "none")
	}
	for _, f := range v.FailedSHAs {
		w.p("failed sha", failedLine(f))
		if f.Evidence == "" {
			continue
		}
		key := "  evidence:"
		for _, line := range strings.Split(strings.TrimRight(f.Evidence, "\n"), "\n") {
			fmt.Fprintf(w, "%-14s %s\n", key, printable(line))
			key = ""
		}
	}
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
	case RestoreSkipped:
		prev := "there was no previous release"
		if r.SHA != "" {
			prev = "the previous release " + r.SHA + " is not restored"
		}
		return fmt.Sprintf("%s at %s: the failed release stays live, %s: %s; a person decides", r.Result, at, prev, r.Detail)
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
