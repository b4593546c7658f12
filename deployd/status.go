package deployd

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
)

// StatusSchema is the version of Status as JSON (`monky-deployd status --json`,
// docs/OPERATIONS.md "Watching a box"). Fields may be added within a version;
// removing or renaming one, or changing what it means, raises it.
const StatusSchema = 2

// Verdict is what a Status says of the box as a whole, on its first line.
type Verdict string

// The verdicts, from best to worst but for VerdictUnknown; Exit gives each its exit
// code as monitoring plugins read them (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
const (
	// VerdictOK: the box does its job: its last run ended 0, the live release (if
	// any) is healthy, its token and its state dir are usable.
	VerdictOK Verdict = "ok"
	// VerdictWarning: the box serves, but something needs watching: a temporary
	// condition younger than LastingAfter, a live health docker could not tell, no
	// run recorded for a while.
	VerdictWarning Verdict = "warning"
	// VerdictCritical: a person must act: a condition that is not temporary or has
	// lasted LastingAfter, an unhealthy live release, a degraded restore, no usable
	// token, the latch, a state dir that cannot take the state.
	VerdictCritical Verdict = "critical"
	// VerdictUnknown: status cannot tell: the state cannot be read.
	VerdictUnknown Verdict = "unknown"
)

// Exit is the exit code of `monky-deployd status` for v: 0, 1, 2 or 3.
func (v Verdict) Exit() int {
	switch v {
	case VerdictOK:
		return 0
	case VerdictWarning:
		return 1
	case VerdictCritical:
		return 2
	}
	return 3
}

// LastingAfter is how long a temporary condition (runs ending 75) lasts before status
// calls it critical: a box that has not been able to deploy for an hour is not well,
// whatever the timer thinks of 75.
const LastingAfter = time.Hour

// Status is the box's account of itself, read without the network: a view of the
// state, the token file, the state dir and the config, not state.json. Its JSON is
// versioned by Schema; optional objects are null when there is nothing to tell, lists
// are never null, times are RFC 3339 in UTC. Text renders it for a person.
type Status struct {
	Schema  int    `json:"schema"`
	EnvID   string `json:"env_id"`
	Version string `json:"agent_version"`
	// Verdict is the box as a whole; Healthy is Verdict == VerdictOK.
	Verdict Verdict `json:"verdict"`
	Healthy bool    `json:"healthy"`
	// Headline is the verdict in a sentence: the worst problem, or what the box
	// serves.
	Headline string `json:"headline"`
	// Error says why status could not read the state ("" when it could); the
	// verdict is then unknown.
	Error string `json:"error"`
	// Problems are why the verdict is not ok, worst first, each with its code and
	// next step.
	Problems []StatusProblem `json:"problems"`
	// Condition is the streak of runs that did not end 0; null when the last run
	// ended 0.
	Condition *StatusCondition `json:"condition"`
	// StateDir says whether the state dir can take the state.
	StateDir StatusStateDir `json:"state_dir"`
	// Live is the release `current` points to; null when none.
	Live *StatusLive `json:"live"`
	// LastCheckin is when tenancy last answered a check-in; null: never.
	LastCheckin *time.Time `json:"last_checkin"`
	// LastReport is the last outcome reported to tenancy; null: none yet.
	LastReport *StatusReport `json:"last_report"`
	// LastRun is the last tick or bootstrap; null: never.
	LastRun *StatusRun `json:"last_run"`
	// LastFailure is the last run that ended non-zero, even when later runs did not;
	// null: none.
	LastFailure *StatusRun  `json:"last_failure"`
	Token       StatusToken `json:"token"`
	// Signatures says whether the box runs only signed bundles.
	Signatures StatusSignatures `json:"signatures"`
	// Latch is the AGENT_ENV_MISMATCH latch; null: none.
	Latch *StatusLatch `json:"latch"`
	// LastRestore is what became of the box after the last apply that failed after
	// promote; null: none since the last success.
	LastRestore *StatusRestore `json:"last_restore"`
	// LastReclaim is what the image hygiene of the last apply removed; null: nothing.
	LastReclaim *StatusReclaim `json:"last_reclaim"`
	// Hooks are the hook runs of the last apply that had hooks, one line each (phase,
	// service, when, result, exit, the last line of its redacted output); absent:
	// none.
	Hooks []string `json:"hooks,omitempty"`
	// Rebuilt says that a run found state.json corrupt and rebuilt the state (and
	// what came back from the kept file); null: not since the last successful apply
	// of a later run.
	Rebuilt *Rebuilt `json:"rebuilt"`
	// FailedSHAs are the shas that failed on the box, newest first (equal times by
	// sha).
	FailedSHAs []StatusFailed `json:"failed_shas"`
	// Deferred is the apply the box prepared and did not switch to (a hold, a
	// window); null while nothing waits. The headline says it.
	Deferred *Deferral `json:"deferred"`
	// Offline says since when tenancy was not reached; null while check-ins are
	// answered.
	Offline *StatusOffline `json:"offline"`
}

// StatusProblem is one reason a Status is not ok.
type StatusProblem struct {
	// Code is the problem's code; "" when the failing run did not record one.
	Code codes.Code `json:"code"`
	// Level is VerdictWarning or VerdictCritical.
	Level    Verdict `json:"level"`
	Problem  string  `json:"problem"`
	NextStep string  `json:"next_step"`
}

// StatusCondition is State.Condition as Status shows it.
type StatusCondition struct {
	Code      codes.Code `json:"code"`
	Exit      int        `json:"exit"`
	Since     time.Time  `json:"since"`
	CodeSince time.Time  `json:"code_since"`
	Last      time.Time  `json:"last"`
	Runs      int        `json:"runs"`
	SHA       string     `json:"sha"`
	Detail    string     `json:"detail"`
	// NextAttempt is when the box tries again by itself where it waits; null: at
	// its next tick.
	NextAttempt *time.Time `json:"next_attempt"`
}

// StatusStateDir is whether the state dir can take the state: the agent writes it
// at the end of every run.
type StatusStateDir struct {
	Path     string `json:"path"`
	Writable bool   `json:"writable"`
	// FreeKiB is the space available in it (statfs's f_bavail); -1 when it could
	// not be measured.
	FreeKiB int64 `json:"free_kib"`
	// Problem says why it cannot take the state; "" when it can.
	Problem string `json:"problem"`
}

// StatusLive is the live release.
type StatusLive struct {
	SHA       string `json:"sha"`
	Serial    int64  `json:"serial"`
	Confirmed bool   `json:"confirmed"`
	// Health is the live release's health as the last check-in read it; null when
	// not known.
	Health *StatusHealth `json:"health"`
}

// StatusHealth is the live release's health.
type StatusHealth struct {
	ObservedAt time.Time `json:"observed_at"`
	// Healthy is meaningful only when Reason is "".
	Healthy bool `json:"healthy"`
	// Reason says why docker could not be asked, "" when it answered.
	Reason   string          `json:"reason"`
	Services []StatusService `json:"services"`
}

// StatusService is one service of the live health.
type StatusService struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Health   string `json:"health"`
	ExitCode int    `json:"exit_code"`
	Restarts int    `json:"restarts"`
	Ready    bool   `json:"ready"`
}

// StatusReport is the last report.
type StatusReport struct {
	Result string     `json:"result"`
	Code   codes.Code `json:"code"`
	Detail string     `json:"detail"`
	SHA    string     `json:"sha"`
}

// StatusRun is a run (a tick or a bootstrap).
type StatusRun struct {
	At   time.Time `json:"at"`
	Exit int       `json:"exit"`
	// Code is "" for a run that ended 0.
	Code codes.Code `json:"code"`
}

// Token states of a Status.
const (
	TokenPresent    = "present"    // a token is stored; as far as the state knows it is good
	TokenMissing    = "missing"    // no token file
	TokenCorrupt    = "corrupt"    // the file holds no possible token
	TokenUnreadable = "unreadable" // the file cannot be read (a fifo, a directory, EACCES)
	TokenRefused    = "refused"    // a token is stored, but the last run ended UNAUTHENTICATED
	TokenExpired    = "expired"    // a token is stored, but it expired as last looked up
)

// StatusToken is the OpenBao token.
type StatusToken struct {
	// State is one of the Token* constants.
	State string `json:"state"`
	// Expires is when the token expires as last looked up; null: not known.
	Expires *time.Time `json:"expires"`
	// Detail says why a token is corrupt or unreadable; "" otherwise.
	Detail string `json:"detail"`
}

// StatusSignatures says whether the box runs only signed bundles.
type StatusSignatures struct {
	// Required is true when the config trusts keys: an unsigned bundle is refused.
	Required bool `json:"required"`
	// Keys are the ids of the trusted keys, sorted; empty when none.
	Keys []string `json:"keys"`
	// Serials is the highest serial applied under each key (the replay ratchet).
	Serials map[string]int64 `json:"serials"`
}

// StatusLatch is the AGENT_ENV_MISMATCH latch.
type StatusLatch struct {
	Code    codes.Code `json:"code"`
	EnvID   string     `json:"env_id"`
	Since   time.Time  `json:"since"`
	Message string     `json:"message"`
	// Active is false once the config's env_id is not the one latched: the next run
	// clears it.
	Active bool `json:"active"`
}

// StatusRestore is what became of the box after the last apply that failed after
// promote.
type StatusRestore struct {
	Result   string    `json:"result"`
	SHA      string    `json:"sha"`
	Detail   string    `json:"detail"`
	At       time.Time `json:"at"`
	Degraded bool      `json:"degraded"`
}

// StatusReclaim is what the image hygiene of the last apply removed.
type StatusReclaim struct {
	At     time.Time `json:"at"`
	Images int       `json:"images"`
	Bytes  int64     `json:"bytes"`
	Failed int       `json:"failed"`
}

// StatusFailed is a sha that failed on the box.
type StatusFailed struct {
	SHA    string     `json:"sha"`
	Serial int64      `json:"serial"`
	Code   codes.Code `json:"code"`
	Detail string     `json:"detail"`
	At     time.Time  `json:"at"`
	// Until is when the box tries it again by itself; null: when tenancy asks with
	// retry.
	Until *time.Time `json:"until"`
	// Evidence is what the failing services said (their last healthchecks and log
	// lines), redacted; "" when the failure was not a health check's.
	Evidence string `json:"evidence"`
}

// StatusOptions are the choices of ReadStatus. The zero value is usable.
type StatusOptions struct {
	// Now is the time the status is taken at. Zero: time.Now().
	Now time.Time
	// Secrets learns the stored token the moment it is read, so that the caller's
	// redactor can keep it out of anything printed. Nil: none.
	Secrets secret.Registry
}

// ReadStatus is the status of the box of cfg, read without the network and without
// the run lock: the state, the token file, the state dir. A state that cannot be read
// is a Status whose Verdict is unknown and whose Error says why.
func ReadStatus(cfg Config, o StatusOptions) Status {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	v := Status{Schema: StatusSchema, EnvID: cfg.EnvID, Version: Version,
		Problems: []StatusProblem{}, FailedSHAs: []StatusFailed{}}
	tok := readTokenState(cfg, o.Secrets)
	st, err := ReadState(cfg)
	if err != nil {
		return unknownStatus(cfg, codes.StateUnavailable, err, tok)
	}
	v.fill(cfg, st, tok, o.Now)
	v.StateDir = stateDirOf(cfg)
	v.judge(cfg, st, o.Now)
	return v
}

// StatusOf is ReadStatus of the config at path. A config that cannot be loaded is a
// Status whose verdict is unknown and whose Error says why; err is that error.
func StatusOf(path string, o StatusOptions) (Status, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return unknownStatus(Config{}, CodeOf(err), err, StatusToken{State: TokenUnreadable, Detail: "the config names no token file"}), err
	}
	return ReadStatus(cfg, o), nil
}

// unknownStatus is the status of a box whose state (or config) cannot be read: err,
// of code.
func unknownStatus(cfg Config, code codes.Code, err error, tok StatusToken) Status {
	v := Status{Schema: StatusSchema, EnvID: cfg.EnvID, Version: Version, Verdict: VerdictUnknown,
		Headline: "UNKNOWN: " + err.Error(), Error: err.Error(), Token: tok,
		Signatures: signaturesOf(cfg, nil), FailedSHAs: []StatusFailed{}, StateDir: StatusStateDir{Path: cfg.StateDir, FreeKiB: -1},
		Problems: []StatusProblem{{Code: code, Level: VerdictCritical, Problem: err.Error(), NextStep: NextStep(code)}}}
	if cfg.StateDir != "" {
		v.StateDir = stateDirOf(cfg)
	}
	return v
}

// Status is ReadStatus of the agent's box at the agent's clock, with the agent's
// redactor learning the token.
func (a *Agent) Status() Status {
	return ReadStatus(a.cfg, StatusOptions{Now: a.now(), Secrets: a.red})
}

// readTokenState is what the token file holds, as status tells it; a token read is
// added to reg.
func readTokenState(cfg Config, reg secret.Registry) StatusToken {
	tok, err := ReadToken(cfg)
	switch {
	case errors.Is(err, ErrTokenCorrupt):
		return StatusToken{State: TokenCorrupt, Detail: err.Error()}
	case err != nil:
		return StatusToken{State: TokenUnreadable, Detail: err.Error()}
	case tok.IsZero():
		return StatusToken{State: TokenMissing}
	}
	if reg != nil {
		reg.Add(tok.Reveal())
	}
	return StatusToken{State: TokenPresent}
}

// stateDirOf says whether the state dir can take the state: it can be written (a
// read-only mount, a missing ReadWritePaths=) and has room for it. It writes
// nothing.
func stateDirOf(cfg Config) StatusStateDir {
	d := StatusStateDir{Path: cfg.StateDir, FreeKiB: -1}
	dir := fsutil.ExistingParent(cfg.StateDir)
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		d.Problem = fmt.Sprintf("%s cannot be written (%v): every run fails to save its state", dir, err)
		return d
	}
	d.Writable = true
	if space, err := fsutil.SpaceOf(dir); err == nil {
		d.FreeKiB = space.Free >> 10
		if space.Free < stateRoom {
			d.Problem = fmt.Sprintf("%s has %d KiB free, less than the %d KiB a run needs for the token and the state", dir, d.FreeKiB, stateRoom>>10)
		}
	}
	return d
}

// fill copies what st, the token file and cfg say into v.
func (v *Status) fill(cfg Config, st State, tok StatusToken, now time.Time) {
	v.Token = StatusToken{State: tok.State, Detail: tok.Detail, Expires: timeOrNil(st.TokenExpires)}
	v.Signatures = signaturesOf(cfg, st.SignedSerials)
	if st.LiveSHA != "" {
		v.Live = &StatusLive{SHA: st.LiveSHA, Serial: st.LiveSerial, Confirmed: st.Confirmed, Health: healthOf(st.Live)}
	}
	v.LastCheckin = timeOrNil(st.LastCheckin)
	if st.LastResult != "" || st.LastCode != "" {
		v.LastReport = &StatusReport{Result: st.LastResult, Code: st.LastCode, Detail: st.LastDetail, SHA: st.LastSHA}
	}
	if f := st.LastFailure; f != nil {
		v.LastFailure = &StatusRun{At: f.At.UTC(), Exit: f.Exit, Code: f.Code}
	}
	if !st.LastTick.IsZero() {
		v.LastRun = &StatusRun{At: st.LastTick.UTC(), Exit: st.LastExit}
		if c := st.Condition; st.LastExit != ExitOK && c != nil {
			v.LastRun.Code = c.Code
		}
	}
	if c := st.Condition; c != nil {
		v.Condition = &StatusCondition{Code: c.Code, Exit: c.Exit, Since: c.Since.UTC(), CodeSince: c.CodeSince.UTC(),
			Last: c.Last.UTC(), Runs: c.Runs, SHA: c.SHA, Detail: c.Detail, NextAttempt: timeOrNil(c.NextAttempt)}
	}
	if l := st.EnvMismatch; l != nil {
		v.Latch = &StatusLatch{Code: codes.AgentEnvMismatch, EnvID: l.EnvID, Since: l.At.UTC(), Message: l.Message, Active: l.EnvID == cfg.EnvID}
	}
	if r := st.LastRestore; r != nil {
		v.LastRestore = &StatusRestore{Result: r.Result, SHA: r.SHA, Detail: r.Detail, At: r.At.UTC(), Degraded: r.Degraded()}
	}
	v.Hooks = st.Hooks.lines()
	if r := st.LastReclaim; r != nil {
		v.LastReclaim = &StatusReclaim{At: r.At.UTC(), Images: r.Images, Bytes: r.Bytes, Failed: r.Failed}
	}
	if r := st.Rebuilt; r != nil {
		v.Rebuilt = &Rebuilt{At: r.At.UTC(), Why: r.Why, Kept: r.Kept}
	}
	v.Deferred = statusDeferral(st.Deferral)
	v.Offline = offlineOf(st)
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
		v.FailedSHAs = append(v.FailedSHAs, StatusFailed{SHA: sha, Serial: f.Serial, Code: f.Code, Detail: f.Detail,
			At: f.At.UTC(), Until: timeOrNil(f.Until), Evidence: f.Evidence})
	}
	refused := st.LastExit != ExitOK && st.Condition != nil && st.Condition.Code == codes.Unauthenticated
	if refused && v.Token.State == TokenPresent {
		v.Token.State = TokenRefused
	}
	if v.Token.State == TokenPresent && !st.TokenExpires.IsZero() && now.After(st.TokenExpires) {
		v.Token.State = TokenExpired
	}
}

// healthOf is h as Status shows it; nil for nil.
func healthOf(h *LiveHealth) *StatusHealth {
	if h == nil {
		return nil
	}
	sh := &StatusHealth{ObservedAt: h.ObservedAt.UTC(), Healthy: h.Healthy, Reason: h.Reason, Services: []StatusService{}}
	for _, s := range h.Services {
		sh.Services = append(sh.Services, StatusService{Name: s.Name, State: s.State, Health: s.Health,
			ExitCode: s.ExitCode, Restarts: s.Restarts, Ready: s.Ready})
	}
	return sh
}

// signaturesOf is the signature part of the status of cfg and the ratchet serials.
func signaturesOf(cfg Config, serials bundle.Serials) StatusSignatures {
	v := StatusSignatures{Keys: []string{}, Serials: map[string]int64{}}
	if ring, err := cfg.KeyRing(); err == nil {
		for _, id := range ring.IDs() {
			v.Keys = append(v.Keys, string(id))
		}
	}
	slices.Sort(v.Keys)
	v.Required = len(v.Keys) > 0
	for id, n := range serials {
		v.Serials[string(id)] = n
	}
	return v
}

// judge sets v's problems, verdict and headline from what it holds: the one place
// that decides whether the box is ok.
func (v *Status) judge(cfg Config, st State, now time.Time) {
	if l := v.Latch; l != nil && l.Active {
		v.problem(codes.AgentEnvMismatch, VerdictCritical, fmt.Sprintf("tenancy says this box's token belongs to another env (latched since %s): runs exit 78", l.Since.Format(time.RFC3339)))
	}
	switch v.Token.State {
	case TokenMissing:
		v.problem(codes.Unauthenticated, VerdictCritical, "no OpenBao token at "+cfg.TokenPath())
	case TokenCorrupt:
		v.problem(codes.Unauthenticated, VerdictCritical, v.Token.Detail)
	case TokenUnreadable:
		v.problem(codes.StateUnavailable, VerdictCritical, v.Token.Detail)
	case TokenExpired:
		v.problem(codes.Unauthenticated, VerdictCritical, "the OpenBao token expired at "+v.Token.Expires.Format(time.RFC3339)+" (as last looked up)")
	}
	if d := v.StateDir; d.Problem != "" {
		code := codes.StateUnavailable
		if d.Writable {
			code = codes.DiskFull
		}
		v.problem(code, VerdictCritical, "the state dir cannot take the state: "+d.Problem)
	}
	if c := v.Condition; c != nil && (c.Code != codes.AgentEnvMismatch || v.Latch == nil || v.Latch.Active) {
		level := VerdictCritical
		if c.Exit == ExitTemporary && now.Sub(c.Since) < LastingAfter {
			level = VerdictWarning
		}
		what := fmt.Sprintf("the last run ended on %s (exit %d) at %s", c.Code, c.Exit, c.CodeSince.Format(time.RFC3339))
		if c.Runs > 1 {
			what = fmt.Sprintf("the last %d runs ended on %s (exit %d) since %s", c.Runs, c.Code, c.Exit, c.CodeSince.Format(time.RFC3339))
		}
		if c.Since.Before(c.CodeSince) {
			what += fmt.Sprintf("; no run has ended 0 since %s", c.Since.Format(time.RFC3339))
		}
		if c.NextAttempt != nil {
			what += "; the box tries again by itself at " + c.NextAttempt.Format(time.RFC3339)
		}
		v.problem(c.Code, level, what)
	}
	if l := v.Live; l != nil && l.Health != nil {
		switch h := l.Health; {
		case h.Reason != "":
			v.problem(codes.DockerUnavailable, VerdictWarning, "the live release's health is unknown since "+h.ObservedAt.Format(time.RFC3339)+": "+h.Reason)
		case !h.Healthy:
			v.problemStep(codes.Unhealthy, VerdictCritical, "the live release "+release.Short(l.SHA)+" is not healthy (at "+h.ObservedAt.Format(time.RFC3339)+"): "+notReady(h),
				"read its logs (`cd "+cfg.CurrentLink()+" && docker compose logs --tail 100`); the agent changes nothing on its own: tenancy sees it in the check-in and may ask for the release again (retry)")
		}
	}
	switch r := v.LastRestore; {
	case r != nil && r.Result == RestoreSkipped:
		v.problemStep("", VerdictCritical, "the last failed apply was not restored: "+r.Detail,
			"a person decides: publish a fixed release, or roll back explicitly from the console to an older serial (a new apply), or take the env down; the agent changes nothing on its own")
	case r != nil && r.Degraded:
		v.problemStep("", VerdictCritical, "the last failed apply left the box degraded: "+r.Result+" "+release.Short(r.SHA)+" ("+r.Detail+")",
			"look with `docker compose ps --all` and `docker compose logs` in the current directory; something the releases share is likely broken")
	}
	if stale := staleAfter(st); v.LastRun != nil && now.Sub(v.LastRun.At) > stale {
		v.problemStep("", VerdictWarning, fmt.Sprintf("no run has recorded its state since %s (more than %s): the timer or the loop is not running, or runs cannot save their state",
			v.LastRun.At.Format(time.RFC3339), stale),
			"check the timer (`systemctl list-timers monky-deployd.timer`) or the loop (`systemctl status monky-deployd-loop`), and that the state dir can be written")
	}
	slices.SortStableFunc(v.Problems, func(a, b StatusProblem) int { return b.Level.Exit() - a.Level.Exit() })
	v.Verdict = VerdictOK
	if len(v.Problems) > 0 {
		v.Verdict = v.Problems[0].Level
	}
	v.Healthy = v.Verdict == VerdictOK
	v.Headline = v.headline()
}

// problem adds a problem with code's next step, unless one of the same code is there
// already: the latch and the run that ended on it are one problem.
func (v *Status) problem(code codes.Code, level Verdict, what string) {
	v.problemStep(code, level, what, NextStep(code))
}

// problemStep adds a problem whose next step is not its code's: a condition of the
// box that no run ended on.
func (v *Status) problemStep(code codes.Code, level Verdict, what, step string) {
	for _, p := range v.Problems {
		if p.Code == code && code != "" {
			return
		}
	}
	v.Problems = append(v.Problems, StatusProblem{Code: code, Level: level, Problem: what, NextStep: step})
}

// headline is the verdict in a sentence, for the first line of Text.
func (v *Status) headline() string {
	if len(v.Problems) > 0 {
		return strings.ToUpper(string(v.Verdict)) + ": " + v.Problems[0].Problem + offlineHeadline(v.Offline) + deferredHeadline(v.Deferred, "; ")
	}
	if v.Deferred != nil {
		return "OK: " + servingPhrase(v.Live) + deferredHeadline(v.Deferred, "; ")
	}
	if v.Live == nil {
		return "OK: nothing is live; the last run ended 0"
	}
	return fmt.Sprintf("OK: serving %s (serial %d); the last run ended 0", release.Short(v.Live.SHA), v.Live.Serial)
}

// staleAfter is how long after its last run a box whose state was not written again
// is called stale: three of tenancy's intervals, at least half an hour (the loop
// backs off up to 15 minutes on 75).
func staleAfter(st State) time.Duration {
	return max(30*time.Minute, 3*st.NextCheckin)
}

// notReady names the services of h that are not ready.
func notReady(h *StatusHealth) string {
	var bad []string
	for _, s := range h.Services {
		if !s.Ready {
			bad = append(bad, s.Name+": "+serviceLine(s))
		}
	}
	if len(bad) == 0 {
		return "a service restarted since the check-in before"
	}
	return strings.Join(bad, "; ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// serviceLine is one service of the live health.
func serviceLine(s StatusService) string {
	line := s.State
	if s.Health != "" {
		line += ", health " + s.Health
	}
	if s.State == "exited" || s.State == "dead" {
		line += fmt.Sprintf(", exit code %d", s.ExitCode)
	}
	return line + fmt.Sprintf(", %d restarts", s.Restarts)
}

// statusDeferral is d as Status shows it (times in UTC); nil for nil.
func statusDeferral(d *Deferral) *Deferral {
	if d == nil {
		return nil
	}
	c := *d
	c.Since = c.Since.UTC()
	if !c.Until.IsZero() {
		c.Until = c.Until.UTC()
	}
	return &c
}

// deferredHeadline is what status's first line says of d after sep, e.g. "; DEFERRED:
// 1f2e3d4c5b6a (serial 4) waits for the hold of alice until 2026-12-04T15:00:00Z
// (demo at 3), prepared"; "" for nil.
func deferredHeadline(d *Deferral, sep string) string {
	if d == nil {
		return ""
	}
	s := fmt.Sprintf("%sDEFERRED: %s (serial %d) waits", sep, release.Short(d.SHA), d.Serial)
	switch d.Why {
	case DeferHold:
		s += " for the hold of " + d.Owner
		if !d.Until.IsZero() {
			s += " until " + d.Until.UTC().Format(time.RFC3339)
		}
		if d.Reason != "" {
			s += " (" + d.Reason + ")"
		}
	default:
		s += " for an apply window"
		if !d.Until.IsZero() {
			s += ", the next opens " + d.Until.UTC().Format(time.RFC3339)
		}
	}
	if d.Prepared {
		s += "; prepared (verified, kept, images pulled), no lease taken"
	}
	return s
}

// servingPhrase is what the box serves, for a headline.
func servingPhrase(l *StatusLive) string {
	if l == nil {
		return "nothing is live"
	}
	return fmt.Sprintf("serving %s (serial %d)", release.Short(l.SHA), l.Serial)
}
