package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
)

// statusSchema is the version of the view `status --json` prints (docs/OPERATIONS.md,
// "Watching a box"). Fields may be added within a version; removing or renaming one,
// or changing what it means, raises it.
const statusSchema = 1

// Token states of the status view.
const (
	tokenPresent    = "present"    // a token is stored; as far as the state knows it is good
	tokenMissing    = "missing"    // no token file
	tokenCorrupt    = "corrupt"    // the file holds no possible token
	tokenUnreadable = "unreadable" // the file cannot be read (a fifo, a directory, EACCES)
	tokenRefused    = "refused"    // a token is stored, but the last run ended UNAUTHENTICATED
	tokenExpired    = "expired"    // a token is stored, but it expired as last looked up
)

// statusJSON is what `status --json` prints, version statusSchema. It is a view of the
// state, the token file and the config, not the state file: its fields are documented
// and kept. Optional objects are null when there is nothing to tell; lists are never
// null; times are RFC 3339 in UTC.
type statusJSON struct {
	Schema  int    `json:"schema"`
	EnvID   string `json:"env_id"`
	Version string `json:"agent_version"`
	// Healthy is what the exit code says: true (0) when Problems is empty.
	Healthy bool `json:"healthy"`
	// Problems are why the box is not healthy, each with its code and next step.
	Problems []statusProblem `json:"problems"`
	// Live is the release `current` points to; null when none.
	Live *statusLive `json:"live"`
	// LastCheckin is when tenancy last answered a check-in; null: never.
	LastCheckin *time.Time `json:"last_checkin"`
	// LastReport is the last outcome reported to tenancy; null: none yet.
	LastReport *statusReport `json:"last_report"`
	// LastRun is the last tick or bootstrap; null: never.
	LastRun *statusRun `json:"last_run"`
	// LastFailure is the last run that ended non-zero, even when later runs did not;
	// null: none.
	LastFailure *statusRun `json:"last_failure"`
	// Temporary is the temporary condition the last run ended on; null: none.
	Temporary *statusTemporary `json:"temporary"`
	Token     statusToken      `json:"token"`
	// Signatures says whether the box runs only signed bundles (docs/BUNDLE.md,
	// "Signatures").
	Signatures statusSignatures `json:"signatures"`
	// Latch is the AGENT_ENV_MISMATCH latch; null: none.
	Latch *statusLatch `json:"latch"`
	// LastRestore is what became of the box after the last apply that failed after
	// promote; null: none since the last success.
	LastRestore *statusRestore `json:"last_restore"`
	// LastReclaim is what the image hygiene of the last apply removed; null: nothing.
	LastReclaim *statusReclaim `json:"last_reclaim"`
	// FailedSHAs are the shas that failed on the box, newest first (equal times by sha).
	FailedSHAs []statusFailed `json:"failed_shas"`
}

type statusProblem struct {
	// Code is the problem's code; "" when the failing run did not record one.
	Code     codes.Code `json:"code"`
	Problem  string     `json:"problem"`
	NextStep string     `json:"next_step"`
}

type statusLive struct {
	SHA       string `json:"sha"`
	Serial    int64  `json:"serial"`
	Confirmed bool   `json:"confirmed"`
	// Health is the live release's health as the last check-in read it; null when
	// not known.
	Health *statusHealth `json:"health"`
}

type statusHealth struct {
	ObservedAt time.Time `json:"observed_at"`
	// Healthy is meaningful only when Reason is "".
	Healthy bool `json:"healthy"`
	// Reason says why docker could not be asked, "" when it answered.
	Reason   string          `json:"reason"`
	Services []statusService `json:"services"`
}

type statusService struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Health   string `json:"health"`
	ExitCode int    `json:"exit_code"`
	Restarts int    `json:"restarts"`
	Ready    bool   `json:"ready"`
}

type statusReport struct {
	Result string     `json:"result"`
	Code   codes.Code `json:"code"`
	Detail string     `json:"detail"`
	SHA    string     `json:"sha"`
}

type statusRun struct {
	At   time.Time `json:"at"`
	Exit int       `json:"exit"`
	// Code is "" for a run that ended 0, and for a failure that recorded none.
	Code codes.Code `json:"code"`
}

type statusTemporary struct {
	Code              codes.Code `json:"code"`
	RetryAfterSeconds int        `json:"retry_after_s"`
}

type statusToken struct {
	// State is present, missing, corrupt, unreadable, refused or expired.
	State string `json:"state"`
	// Expires is when the token expires as last looked up; null: not known.
	Expires *time.Time `json:"expires"`
	// Detail says why a token is corrupt or unreadable; "" otherwise.
	Detail string `json:"detail"`
}

type statusLatch struct {
	Code    codes.Code `json:"code"`
	EnvID   string     `json:"env_id"`
	Since   time.Time  `json:"since"`
	Message string     `json:"message"`
	// Active is false once the config's env_id is not the one latched: the next run
	// clears it.
	Active bool `json:"active"`
}

type statusRestore struct {
	Result   string    `json:"result"`
	SHA      string    `json:"sha"`
	Detail   string    `json:"detail"`
	At       time.Time `json:"at"`
	Degraded bool      `json:"degraded"`
}

type statusReclaim struct {
	At     time.Time `json:"at"`
	Images int       `json:"images"`
	Bytes  int64     `json:"bytes"`
	Failed int       `json:"failed"`
}

type statusFailed struct {
	SHA    string     `json:"sha"`
	Serial int64      `json:"serial"`
	Code   codes.Code `json:"code"`
	Detail string     `json:"detail"`
	At     time.Time  `json:"at"`
}

func (c *cli) status(args []string) int {
	fs := c.flags("status")
	configPath := fs.String("config", deployd.DefaultConfigPath, "config file")
	asJSON := fs.Bool("json", false, "print the status view as JSON (schema 1)")
	cfg, code, ok := c.config(fs, args, configPath)
	if !ok {
		return code
	}
	// status never touches the network; it still passes through a redactor that
	// knows the stored token.
	tok := readTokenFile(cfg, c.red)
	st, err := deployd.ReadState(cfg)
	if err != nil {
		c.log.Error("could not read the state", "code", deployd.CodeOf(err), "err", err)
		return deployd.ExitFailed
	}
	v := buildStatus(cfg, st, tok, time.Now())
	var buf strings.Builder
	if *asJSON {
		data, _ := json.MarshalIndent(v, "", "  ")
		buf.Write(data)
		buf.WriteByte('\n')
	} else {
		writeStatus(&buf, v)
	}
	if code := c.output(c.red.Redact(buf.String())); code != 0 {
		return code
	}
	if !v.Healthy {
		return deployd.ExitFailed
	}
	return 0
}

// statusSignatures is what status says of bundle signatures.
type statusSignatures struct {
	// Required is true when the config trusts keys: an unsigned bundle is refused.
	Required bool `json:"required"`
	// Keys are the ids of the trusted keys, sorted; empty when none.
	Keys []string `json:"keys"`
	// Serials is the highest serial applied under each key (the replay ratchet).
	Serials map[string]int64 `json:"serials"`
}

// signaturesOf is the signature part of the status of cfg and st.
func signaturesOf(cfg deployd.Config, st deployd.State) statusSignatures {
	v := statusSignatures{Keys: []string{}, Serials: map[string]int64{}}
	ring, err := cfg.KeyRing()
	if err == nil {
		for _, id := range ring.IDs() {
			v.Keys = append(v.Keys, string(id))
		}
	}
	slices.Sort(v.Keys)
	v.Required = len(v.Keys) > 0
	for id, n := range st.SignedSerials {
		v.Serials[string(id)] = n
	}
	return v
}

// signaturesLine is what status says of bundle signatures.
func signaturesLine(v statusSignatures) string {
	if !v.Required {
		return "not required (no trusted_keys): bundles are not signed"
	}
	return "required, trusted keys " + strings.Join(v.Keys, ", ")
}

// tokenFile is what the token file holds, as status tells it.
type tokenFile struct {
	state  string // tokenPresent, tokenMissing, tokenCorrupt or tokenUnreadable
	detail string
}

// readTokenFile reads cfg's token file as the tick does and registers the token with red.
func readTokenFile(cfg deployd.Config, red *secret.Redactor) tokenFile {
	tok, err := deployd.ReadToken(cfg)
	switch {
	case errors.Is(err, deployd.ErrTokenCorrupt):
		return tokenFile{state: tokenCorrupt, detail: err.Error()}
	case err != nil:
		return tokenFile{state: tokenUnreadable, detail: err.Error()}
	case tok.IsZero():
		return tokenFile{state: tokenMissing}
	}
	red.Add(tok.Reveal())
	return tokenFile{state: tokenPresent}
}

// buildStatus is the status view of st, the token file tok and cfg at now.
func buildStatus(cfg deployd.Config, st deployd.State, tok tokenFile, now time.Time) statusJSON {
	v := statusJSON{
		Schema: statusSchema, EnvID: cfg.EnvID, Version: deployd.Version,
		Problems: []statusProblem{}, FailedSHAs: []statusFailed{},
		Token:      statusToken{State: tok.state, Detail: tok.detail, Expires: timeOrNil(st.TokenExpires)},
		Signatures: signaturesOf(cfg, st),
	}
	if st.LiveSHA != "" {
		v.Live = &statusLive{SHA: st.LiveSHA, Serial: st.LiveSerial, Confirmed: st.Confirmed}
		if h := st.Live; h != nil {
			sh := &statusHealth{ObservedAt: h.ObservedAt.UTC(), Healthy: h.Healthy, Reason: h.Reason, Services: []statusService{}}
			for _, s := range h.Services {
				sh.Services = append(sh.Services, statusService{Name: s.Name, State: s.State, Health: s.Health,
					ExitCode: s.ExitCode, Restarts: s.Restarts, Ready: s.Ready})
			}
			v.Live.Health = sh
		}
	}
	v.LastCheckin = timeOrNil(st.LastCheckin)
	if st.LastResult != "" || st.LastCode != "" {
		v.LastReport = &statusReport{Result: st.LastResult, Code: st.LastCode, Detail: st.LastDetail, SHA: st.LastSHA}
	}
	if f := st.LastFailure; f != nil {
		v.LastFailure = &statusRun{At: f.At.UTC(), Exit: f.Exit, Code: f.Code}
	}
	if !st.LastTick.IsZero() {
		v.LastRun = &statusRun{At: st.LastTick.UTC(), Exit: st.LastExit}
		if f := st.LastFailure; st.LastExit != 0 && f != nil && f.At.Equal(st.LastTick) {
			v.LastRun.Code = f.Code
		}
	}
	if st.LastTemporary != "" {
		v.Temporary = &statusTemporary{Code: st.LastTemporary, RetryAfterSeconds: int(st.RetryAfter / time.Second)}
	}
	if l := st.EnvMismatch; l != nil {
		v.Latch = &statusLatch{Code: codes.AgentEnvMismatch, EnvID: l.EnvID, Since: l.At.UTC(), Message: l.Message, Active: l.EnvID == cfg.EnvID}
	}
	if r := st.LastRestore; r != nil {
		v.LastRestore = &statusRestore{Result: r.Result, SHA: r.SHA, Detail: r.Detail, At: r.At.UTC(), Degraded: r.Degraded()}
	}
	if r := st.LastReclaim; r != nil {
		v.LastReclaim = &statusReclaim{At: r.At.UTC(), Images: r.Images, Bytes: r.Bytes, Failed: r.Failed}
	}
	// Newest first, so that the failure an operator is looking for comes first; equal
	// times by sha, so that two runs print the same.
	shas := slices.SortedFunc(maps.Keys(st.Failed), func(x, y string) int {
		if c := st.Failed[y].At.Compare(st.Failed[x].At); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	for _, sha := range shas {
		f := st.Failed[sha]
		v.FailedSHAs = append(v.FailedSHAs, statusFailed{SHA: sha, Serial: f.Serial, Code: f.Code, Detail: f.Detail, At: f.At.UTC()})
	}

	// The last run's failure, unless it was a 75 (the next tick retries) or a 78 whose
	// latch no longer holds (env_id changed: the next run checks in again).
	lastFailed := v.LastRun != nil && v.LastRun.Exit != deployd.ExitOK && v.LastRun.Exit != deployd.ExitTemporary &&
		(v.LastRun.Exit != deployd.ExitEnvMismatch || v.Latch == nil || v.Latch.Active)
	if lastFailed && v.LastRun.Code == codes.Unauthenticated && tok.state == tokenPresent {
		v.Token.State = tokenRefused
	}
	if v.Token.State == tokenPresent && !st.TokenExpires.IsZero() && now.After(st.TokenExpires) {
		v.Token.State = tokenExpired
	}
	if v.Latch != nil && v.Latch.Active {
		v.addProblem(codes.AgentEnvMismatch, fmt.Sprintf("tenancy says this box's token belongs to another env (latched since %s): runs exit 78", v.Latch.Since.Format(time.RFC3339)))
	}
	switch v.Token.State {
	case tokenMissing:
		v.addProblem(codes.Unauthenticated, "no OpenBao token at "+cfg.TokenPath())
	case tokenCorrupt, tokenUnreadable:
		code := codes.Unauthenticated
		if v.Token.State == tokenUnreadable {
			code = codes.StateUnavailable
		}
		v.addProblem(code, tok.detail)
	case tokenExpired:
		v.addProblem(codes.Unauthenticated, "the OpenBao token expired at "+v.Token.Expires.Format(time.RFC3339)+" (as last looked up)")
	}
	if lastFailed {
		what := fmt.Sprintf("the last run failed (exit %d)", v.LastRun.Exit)
		if v.LastRun.Code != "" {
			what += " with " + string(v.LastRun.Code)
		}
		v.addProblem(v.LastRun.Code, what)
	}
	v.Healthy = len(v.Problems) == 0
	return v
}

// addProblem adds a problem with code's next step, unless one of the same code is
// there: the latch and the run that ended on it are one problem.
func (v *statusJSON) addProblem(code codes.Code, what string) {
	for _, p := range v.Problems {
		if p.Code == code && code != "" {
			return
		}
	}
	step := deployd.NextStep(code)
	if code == "" {
		step = deployd.NextStepUnknown
	}
	v.Problems = append(v.Problems, statusProblem{Code: code, Problem: what, NextStep: step})
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// writeStatus writes the text form of the view v.
func writeStatus(w *strings.Builder, v statusJSON) {
	p := func(k string, val any) { fmt.Fprintf(w, "%-14s %s\n", printable(k+":"), printable(fmt.Sprint(val))) }
	p("env", v.EnvID)
	p("agent", v.Version)
	if v.Healthy {
		p("health", "healthy")
	} else {
		p("health", "not healthy")
	}
	for _, pr := range v.Problems {
		p("problem", pr.Problem)
		p("next step", pr.NextStep)
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
		p("images", deployd.Reclaim{Images: r.Images, Bytes: r.Bytes, Failed: r.Failed}.String()+" at "+r.At.Format(time.RFC3339))
	}
	switch r := v.LastRun; {
	case r == nil:
		p("last run", "never")
	case r.Code != "":
		p("last run", fmt.Sprintf("%s (exit %d, %s)", r.At.Format(time.RFC3339), r.Exit, r.Code))
	default:
		p("last run", fmt.Sprintf("%s (exit %d)", r.At.Format(time.RFC3339), r.Exit))
	}
	if f := v.LastFailure; f != nil {
		code := string(f.Code)
		if code == "" {
			code = "a code not recorded (see the journal's tick line)"
		}
		p("last failure", fmt.Sprintf("%s at %s (exit %d)", code, f.At.Format(time.RFC3339), f.Exit))
	}
	if t := v.Temporary; t != nil {
		line := string(t.Code) + ": the last run ended on it; the next tick retries"
		if t.RetryAfterSeconds > 0 {
			line += fmt.Sprintf(" (tenancy asked to wait %ds)", t.RetryAfterSeconds)
		}
		p("temporary", line)
	}
	p("token", tokenLine(v.Token))
	if v.Token.Expires != nil {
		p("token expires", v.Token.Expires.Format(time.RFC3339))
	}
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
		p("failed sha", fmt.Sprintf("%s serial %d %s", f.SHA, f.Serial, f.Code))
	}
}

// tokenLine is what status says of the token.
func tokenLine(t statusToken) string {
	switch t.State {
	case tokenRefused:
		return "present, but the last run ended " + string(codes.Unauthenticated)
	case tokenExpired:
		return "present, but expired (as last looked up)"
	case tokenCorrupt, tokenUnreadable:
		return t.State + ": " + t.Detail
	default:
		return t.State
	}
}

// restoreLine is what status says of the last restore, with what to do next.
func restoreLine(r statusRestore) string {
	at := r.At.Format(time.RFC3339)
	switch r.Result {
	case deployd.RestoreHealthy:
		return fmt.Sprintf("%s at %s: the previous release %s is live and healthy", r.Result, at, r.SHA)
	case deployd.RestoreNone:
		return fmt.Sprintf("%s at %s: there was no previous release; the failed one was taken down", r.Result, at)
	default:
		return fmt.Sprintf("%s at %s: the previous release %s is not healthy (%s): the box is degraded; look with `docker compose ps --all` in the current directory",
			r.Result, at, r.SHA, r.Detail)
	}
}

// liveLine is what status says of the live release's health at the last check-in.
func liveLine(h statusHealth) string {
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

// serviceLine is one service of the live health.
func serviceLine(s statusService) string {
	line := s.State
	if s.Health != "" {
		line += ", health " + s.Health
	}
	if s.State == "exited" || s.State == "dead" {
		line += fmt.Sprintf(", exit code %d", s.ExitCode)
	}
	return line + fmt.Sprintf(", %d restarts", s.Restarts)
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
