package deployd

import (
	"errors"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/release"
)

// stateRoom is what the state dir must take before the lease: the new token, the
// state file and their temporary copies, with room to spare.
const stateRoom = 256 << 10

// Condition is what has kept the box from doing its job over consecutive runs: a
// streak of runs (ticks and bootstraps) that did not end with exit 0. It is kept in
// state.json with the rest of the state, and `status`, the metrics file and the
// check-in all render this one record (docs/OPERATIONS.md, "Watching a box"), so a
// box that has failed for an hour says so everywhere, with the code and since when.
type Condition struct {
	// Code is the code the latest run of the streak ended on.
	Code codes.Code `json:"code"`
	// Exit is that run's exit code: 75 (temporary), 1 or 78.
	Exit int `json:"exit"`
	// Since is when the first run of the streak ended: the box has not done its job
	// since then.
	Since time.Time `json:"since"`
	// CodeSince is when the first run of the streak that ended on Code ended.
	CodeSince time.Time `json:"code_since"`
	// Last is when the latest run of the streak ended.
	Last time.Time `json:"last"`
	// Runs counts the runs of the streak.
	Runs int `json:"runs"`
	// SHA is the bundle the latest run worked on; "" when it had none.
	SHA string `json:"sha,omitempty"`
	// Detail says what failed, redacted and bounded: files, variables and services,
	// never a value.
	Detail string `json:"detail,omitempty"`
	// NextAttempt is when the box tries again by itself where it waits rather than
	// at the next tick: tenancy's Retry-After (no download and no lease before it), or
	// the end of a sha's hold (a missing secret). Zero: at the next tick.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// Temporary reports whether the condition's runs end with exit 75.
func (c *Condition) Temporary() bool { return c != nil && c.Exit == ExitTemporary }

// Waiting reports whether the box waits for c.NextAttempt at now: an apply then
// checks in (the heartbeat) but neither downloads nor asks for a lease.
func (c *Condition) Waiting(now time.Time) bool {
	return c.Temporary() && c.NextAttempt.After(now)
}

// String is the condition as status's first line and the log tell it, e.g.
// "UNAVAILABLE (exit 75) since 2026-12-03T10:00:00Z, 61 runs".
func (c *Condition) String() string {
	s := fmt.Sprintf("%s (exit %d) since %s, %d runs", c.Code, c.Exit, c.CodeSince.UTC().Format(time.RFC3339), c.Runs)
	if c.Since.Before(c.CodeSince) {
		s += fmt.Sprintf("; not ok since %s", c.Since.UTC().Format(time.RFC3339))
	}
	if !c.NextAttempt.IsZero() {
		s += "; next attempt " + c.NextAttempt.UTC().Format(time.RFC3339)
	}
	return s
}

// endRun records in s how a run that began at start ended at at with err (redact
// makes its text safe for the state): the run's exit code and time, the last failure,
// and the condition: a run that ended 0 ends it, any other extends it (or starts one).
func endRun(s *State, start, at time.Time, sha string, err error, redact func(string) string) {
	v := classify(err)
	exit := ExitOK
	if err != nil {
		exit = v.rule.exit(v.code)
	}
	s.LastTick, s.LastExit = at, exit
	if exit == ExitOK {
		s.Condition = nil
		return
	}
	s.LastFailure = &RunFailure{At: at, Exit: exit, Code: v.code}
	c := s.Condition
	if c == nil {
		c = &Condition{Since: at}
		s.Condition = c
	}
	if c.Code != v.code || c.Runs == 0 {
		c.CodeSince = at
	}
	c.Code, c.Exit, c.Last, c.SHA = v.code, exit, at, sha
	c.Runs++
	c.Detail = boundDetail(redact(err.Error()))
	c.NextAttempt = nextAttempt(s, start, sha, err)
}

// nextAttempt is when the box tries again by itself after a run that began at start
// and ended with err on sha: the end of tenancy's Retry-After (counted from the
// run's start, when tenancy said it), the wait the run kept, or the end of the sha's
// hold; zero when it is the next tick.
func nextAttempt(s *State, start time.Time, sha string, err error) time.Time {
	var w *waitError
	if errors.As(err, &w) {
		return w.until
	}
	if d, ok := tenancy.RetryAfter(err); ok {
		return start.Add(d)
	}
	if f, ok := s.Failed[sha]; ok && sha != "" {
		return f.Until
	}
	return time.Time{}
}

// waitError is an apply held back by tenancy's Retry-After, which an earlier run
// recorded: the run checked in, and exits 75 without a download or a lease until it
// has passed.
type waitError struct {
	code  codes.Code
	until time.Time
}

func (e *waitError) Error() string {
	return fmt.Sprintf("tenancy asked the box to wait until %s (%s): no download and no lease before then", e.until.UTC().Format(time.RFC3339), e.code)
}

// Code is the code of the condition the box waits out.
func (e *waitError) Code() codes.Code { return e.code }

// Results of a Restore: what became of the box after an apply failed after promote.
const (
	// RestoreHealthy: the previous release is live again and every service is ready.
	RestoreHealthy = "restored-healthy"
	// RestoreUnhealthy: the previous release is live again but did not become healthy
	// within health_timeout; the box is degraded.
	RestoreUnhealthy = "restored-unhealthy"
	// RestoreFailed: the previous release could not be brought back (current could not
	// be swapped, or its compose up failed); the box is degraded.
	RestoreFailed = "restore-failed"
	// RestoreNone: there was no previous release; the failed one was taken down.
	RestoreNone = "none"
	// RestoreSkipped: the failed release says restoring the previous one is unsafe
	// (restore: unsafe): the box keeps the failed release as compose left it and a
	// person decides (docs/OPERATIONS.md, "After a failed apply").
	RestoreSkipped = "not-restored"
)

// Restore is what became of the box after an apply failed after promote.
type Restore struct {
	// Result is RestoreHealthy, RestoreUnhealthy, RestoreFailed or RestoreNone.
	Result string `json:"result"`
	// SHA is the restored release, "" with RestoreNone.
	SHA string `json:"sha,omitempty"`
	// Detail says why a restore is not healthy; it names services, never a value.
	Detail string `json:"detail,omitempty"`
	// At is when the restore ended.
	At time.Time `json:"at,omitzero"`
}

// Degraded reports whether the box was left degraded: the restored release is not
// healthy, nothing could be restored, or the failed release stays because it says a
// restore is unsafe (RestoreSkipped).
func (r Restore) Degraded() bool {
	return r.Result == RestoreUnhealthy || r.Result == RestoreFailed || r.Result == RestoreSkipped
}

// String is the restore as the report's detail ends with it, e.g.
// "restore: restored-healthy 1f2e3d4c5b6a".
func (r Restore) String() string {
	s := "restore: " + r.Result
	if r.SHA != "" {
		s += " " + release.Short(r.SHA)
	}
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}

// Reclaim is what the image hygiene after an apply removed.
type Reclaim struct {
	// At is when it ran.
	At time.Time `json:"at"`
	// Images is how many images were removed.
	Images int `json:"images"`
	// Bytes adds up the removed images' sizes: an upper bound of the space freed, as
	// layers shared with images still kept stay on disk.
	Bytes int64 `json:"bytes"`
	// Failed is how many removals docker refused or failed; they are tried again
	// after the next apply.
	Failed int `json:"failed,omitempty"`
}

// String is the summary a report's detail and the log carry.
func (r Reclaim) String() string {
	s := fmt.Sprintf("removed %d images only pruned releases used (up to %s)", r.Images, mib(r.Bytes))
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d could not be removed", r.Failed)
	}
	return s
}

// mib is a byte count for a person ("12.5 MiB").
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// confirmLive records that the live release came up healthy: its services as the
// health wait saw them, and which of them were one-shots already done.
func confirmLive(s *State, states []compose.ServiceState) {
	setServing(s, release.Confirm(serving(s)))
	s.LiveServices, s.LiveOneShots = nil, []string{}
	for _, st := range states {
		s.LiveServices = append(s.LiveServices, st.Name)
		if st.State == "exited" {
			s.LiveOneShots = append(s.LiveOneShots, st.Name)
		}
	}
}

// maxEvidence bounds the health evidence kept with a failure in state.json (the
// report's tail has up to maxTail of it).
const maxEvidence = 4 << 10

// maxDetail bounds the report's detail and the copies of it in state.json: a bundle
// can carry up to 200 refusals, each naming a path or a variable.
const maxDetail = 4 << 10

// detailCut ends a detail that was cut to maxDetail.
const detailCut = " … (cut)"

// boundDetail keeps the head of a detail (the first refusals say the most) within
// maxDetail bytes, cut at a rune boundary.
func boundDetail(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	n := maxDetail - len(detailCut)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + detailCut
}

// keepEnd keeps the end of s within n bytes, cut at a rune boundary.
func keepEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// stateSchema is the version of state.json this agent writes.
const stateSchema = 1

// maxFailedMemory bounds how many failed shas the state remembers.
const maxFailedMemory = 16

// State is what the agent remembers between ticks, stored in state.json (mode 0600).
// It never holds a secret value: shas, serials, codes, times and details that name
// files, variables and services only. `monky-deployd status` prints it.
type State struct {
	// Schema is the version of the file's format.
	Schema int `json:"schema"`
	// EnvID is the environment the box served when the state was written.
	EnvID string `json:"env_id"`
	// LiveSHA and LiveSerial identify the release `current` points to; empty when down.
	LiveSHA    string `json:"live_sha,omitempty"`
	LiveSerial int64  `json:"live_serial,omitempty"`
	// Confirmed is true once the live release came up healthy. A crash between promote
	// and health leaves it false, and the next apply of the same sha converges it
	// without a new lease.
	Confirmed bool `json:"confirmed"`
	// PreviousSHA is the release restored when an apply fails after promote.
	PreviousSHA string `json:"previous_sha,omitempty"`
	// LiveServices are the compose services of the live release, recorded when it
	// was brought up, so that a check-in sees a service whose container is gone.
	// Empty after a repair or an upgrade: the next check-in reads them from the
	// release.
	LiveServices []string `json:"live_services,omitempty"`
	// LiveOneShots are the services of the live release that were done (exited 0)
	// when it came up healthy: between applies, an exited container is ready only for
	// them. Null while not known (before that, or after a repair): then an exit 0 is
	// ready for every service.
	LiveOneShots []string `json:"live_one_shots"`
	// Live is the live release's health as the last check-in read it; nil when
	// nothing was live.
	Live *LiveHealth `json:"live,omitempty"`
	// Images are the image IDs each release's containers ran, by sha, recorded after its
	// compose up: image hygiene removes those only pruned releases named.
	Images map[string][]string `json:"images,omitempty"`
	// LastReclaim is what the image hygiene of the last apply removed; nil when it
	// removed nothing.
	LastReclaim *Reclaim `json:"last_reclaim,omitempty"`
	// LastCheckin is when tenancy last answered a check-in.
	LastCheckin time.Time `json:"last_checkin,omitzero"`
	// LastAction is the action of the last check-in.
	LastAction string `json:"last_action,omitempty"`
	// LastResult, LastCode, LastDetail and LastSHA describe the last outcome reported;
	// the check-in carries LastResult and LastCode as a pair.
	LastResult string     `json:"last_result,omitempty"`
	LastCode   codes.Code `json:"last_code,omitempty"`
	LastDetail string     `json:"last_detail,omitempty"`
	LastSHA    string     `json:"last_sha,omitempty"`
	// LastTick is when the last run (a tick or a bootstrap) ended, and LastExit its
	// exit code.
	LastTick time.Time `json:"last_tick,omitzero"`
	LastExit int       `json:"last_exit"`
	// LastFailure is the last run that ended non-zero: when, its exit code and its
	// code; nil until one did. A later success leaves it, so that status tells when
	// the box last had trouble; it is the last run's when its At is LastTick.
	LastFailure *RunFailure `json:"last_failure,omitempty"`
	// Condition is the streak of runs that did not end 0, up to the last run; nil
	// once a run ended 0. status, the metrics file and the check-in render it.
	Condition *Condition `json:"condition,omitempty"`
	// NextCheckin is the interval tenancy asked for at the last check-in.
	NextCheckin time.Duration `json:"next_checkin_ns,omitempty"`
	// DockerVersion is the docker server version sent in the check-in, read at
	// DockerVersionAt and reused for an hour, so that the idle tick runs no subprocess.
	DockerVersion   string    `json:"docker_version,omitempty"`
	DockerVersionAt time.Time `json:"docker_version_at,omitzero"`
	// TokenExpires is when the OpenBao token expires, as last looked up.
	TokenExpires time.Time `json:"token_expires,omitzero"`
	// Failed remembers shas that failed on this box, so that they cost no new lease
	// until tenancy asks with retry, or until their hold ends (Failure.Until).
	Failed map[string]Failure `json:"failed,omitempty"`
	// LastRestore says what became of the box after the last apply that failed after
	// promote; nil once a later apply succeeded.
	LastRestore *Restore `json:"last_restore,omitempty"`
	// SignedSerials is the replay ratchet (docs/BUNDLE.md, "Replay"): the highest
	// serial applied under each signing key, recorded after every successful apply of
	// a signed bundle; only raised, an explicit rollback leaves it as it is. Empty on
	// a box that trusts no key.
	SignedSerials bundle.Serials `json:"signed_serials,omitempty"`
	// EnvMismatch is the latch set by AGENT_ENV_MISMATCH: while it names the
	// configured env_id, every run exits 78 without touching the network.
	EnvMismatch *Latch `json:"env_mismatch,omitempty"`
	// Lease is the deploy lease the box took and logged in with, until a report of its
	// sha ends it (applied or failed); a later tick of the same sha goes on under it
	// until its expiry instead of asking again. Before the answer it is the request
	// (sha and request id, no expiry), so that a lost answer is asked for again under
	// the same id. Nil: none.
	Lease *LeaseRecord `json:"lease,omitempty"`
	// Hooks is what the box did of the hooks of the last apply that had any
	// (hooks.go): a run killed in a hook finds it here. Nil: none ran.
	Hooks *HookProgress `json:"hooks,omitempty"`
	// Rebuilt is set when a run found state.json corrupt and rebuilt the state; nil
	// otherwise. A successful apply of a later run clears it (the run that rebuilt
	// it keeps it, converge or not, so that status tells it).
	Rebuilt *Rebuilt `json:"rebuilt,omitempty"`
	// Deferral is the apply the box prepared and did not switch to (a hold, a window;
	// defer.go); nil while nothing waits.
	Deferral *Deferral `json:"deferral,omitempty"`
	// Kept is the verified bundle a deferral kept for the switch; nil: none.
	Kept *KeptBundle `json:"kept,omitempty"`
	// Unreached is when the first of the check-ins in a row that could not reach
	// tenancy (a temporary failure: offline, 5xx, a timeout) failed; zero once one is
	// answered. With LastCheckin, status says since when tenancy was not reached.
	Unreached time.Time `json:"unreached,omitzero"`
}

// RunFailure is a run (a tick or a bootstrap) that ended with a non-zero exit code.
type RunFailure struct {
	At   time.Time `json:"at"`
	Exit int       `json:"exit"`
	// Code is the run's code; "" when the step that failed did not say (the journal's
	// tick line has it).
	Code codes.Code `json:"code,omitempty"`
}

// Failure is the memory of a sha that failed on this box.
type Failure struct {
	Serial int64      `json:"serial"`
	Code   codes.Code `json:"code"`
	Detail string     `json:"detail,omitempty"`
	At     time.Time  `json:"at"`
	// Until is when the hold on the sha ends and the box tries it again by itself
	// (a missing secret: an hour); zero: held until tenancy asks with retry.
	Until time.Time `json:"until,omitzero"`
	// Evidence is what the failing services said: their last healthchecks and log
	// lines (compose.Client.HealthEvidence), redacted and bounded; "" when the
	// failure was not a health check's.
	Evidence string `json:"evidence,omitempty"`
}

// Holds reports whether f still holds its sha against a new lease at now.
func (f Failure) Holds(now time.Time) bool { return f.Until.IsZero() || now.Before(f.Until) }

// Latch records an AGENT_ENV_MISMATCH answer from tenancy.
type Latch struct {
	EnvID   string    `json:"env_id"`
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// rememberFailure records in s that sha failed, keeping the newest maxFailedMemory
// entries.
func rememberFailure(s *State, sha string, f Failure) {
	if s.Failed == nil {
		s.Failed = map[string]Failure{}
	}
	s.Failed[sha] = f
	if len(s.Failed) <= maxFailedMemory {
		return
	}
	type kv struct {
		sha string
		at  time.Time
	}
	all := make([]kv, 0, len(s.Failed))
	for k, v := range s.Failed {
		all = append(all, kv{k, v.At})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.After(all[j].at) })
	for _, e := range all[maxFailedMemory:] {
		delete(s.Failed, e.sha)
	}
}

// LeaseRecord is a deploy lease the box asked for or took: which sha, when, and until
// when its grant was valid. The grant itself is never kept (it was used by the login);
// the token the login gave is bao.token. A zero ExpiresAt is a request whose answer
// did not come (or whose login did not): the next request for the sha sends the same
// RequestID.
type LeaseRecord struct {
	SHA       string    `json:"sha"`
	At        time.Time `json:"at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RequestID string    `json:"request_id,omitempty"`
}

// Rebuilt says that the state was rebuilt because state.json did not parse.
type Rebuilt struct {
	// At is when the run that rebuilt it began.
	At time.Time `json:"at"`
	// Why is what was wrong with state.json, and where it was moved.
	Why string `json:"why"`
	// Kept says what was restored from the kept file (Config.KeepPath), or why
	// nothing could be.
	Kept string `json:"kept"`
}

// serving is what s says the box serves.
func serving(s *State) release.Live {
	return release.Live{SHA: s.LiveSHA, Serial: s.LiveSerial, Previous: s.PreviousSHA, Confirmed: s.Confirmed}
}

// setServing records in s what the release store says the box serves: the only
// writer of the live, previous and confirmed fields.
func setServing(s *State, l release.Live) {
	if l.SHA != s.LiveSHA {
		// What was known of the release that was live is not true of this one.
		s.LiveServices, s.LiveOneShots, s.Live = nil, nil, nil
	}
	s.LiveSHA, s.LiveSerial, s.PreviousSHA, s.Confirmed = l.SHA, l.Serial, l.Previous, l.Confirmed
}

// dockerVersionTTL is how long the docker version sent in the check-in is reused, so
// that the idle tick asks docker nothing but the live release's containers.
const dockerVersionTTL = time.Hour

// dockerVersionFresh reports whether s's DockerVersion, read at DockerVersionAt, may
// still be sent at now.
func dockerVersionFresh(s *State, now time.Time) bool {
	return !s.DockerVersionAt.IsZero() && now.Sub(s.DockerVersionAt) < dockerVersionTTL && now.After(s.DockerVersionAt)
}

// Deferral is an apply the box prepared and did not switch to, kept in state.json
// while it waits: exactly what the check-in carries of it (tenancy.Deferred, whose
// JSON form state.json, status --json and the hold directory's note share). status
// shows it on its first line.
type Deferral = tenancy.Deferred

// KeptBundle is the verified bundle a deferral kept under Config.PreparedDir: the
// switch reads it (after checking its digest) instead of downloading it again.
type KeptBundle struct {
	SHA string `json:"sha"`
	// Digest is the hex sha256 of the file's bytes when it was kept.
	Digest string `json:"digest"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
