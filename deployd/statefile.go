package deployd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
	"github.com/monky/monky-deployd/internal/sentinel"
)

var (
	// ErrStateUnreadable: state.json exists but cannot be read (EACCES, EIO, a mount
	// gone). The run ends on STATE_UNAVAILABLE (exit 1: a person must look) and
	// leaves the file as it is, so that its latch and its memory of failed shas
	// survive.
	ErrStateUnreadable = sentinel.New(codes.StateUnavailable, "state file cannot be read")
	// ErrStateCorrupt: state.json reads but does not parse. The tick moves it aside
	// and rebuilds the state from the live release.
	ErrStateCorrupt = sentinel.New(codes.StateUnavailable, "state file is corrupt")
	// ErrTokenCorrupt: bao.token holds what no OpenBao token is (NULs, bytes that are
	// not printable ASCII, nothing, too much): what a crash or a disk can leave. It is
	// never sent; the agent treats it like an invalid token.
	ErrTokenCorrupt = sentinel.New(codes.Unauthenticated, "the OpenBao token file is corrupt")
)

// maxStateFile bounds state.json; a larger file is corrupt.
const maxStateFile = 16 << 20

// maxTokenFile bounds bao.token; a larger file is corrupt. OpenBao's tokens are a few
// hundred bytes at most.
const maxTokenFile = 4096

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
	// until its expiry instead of asking again. Nil: none.
	Lease *LeaseRecord `json:"lease,omitempty"`
	// Rebuilt is set when a run found state.json corrupt and rebuilt the state; nil
	// otherwise. A successful apply of a later run clears it (the run that rebuilt
	// it keeps it, converge or not, so that status tells it).
	Rebuilt *Rebuilt `json:"rebuilt,omitempty"`
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

// readStateFile reads the state file at path (of the box serving envID) without taking the
// lock and without touching the network. A missing file is an empty State. A file that cannot be read is an error
// matching ErrStateUnreadable; a file that reads but does not parse (or is larger than
// maxStateFile) is an error matching ErrStateCorrupt; a path that is not a regular
// file (a fifo, a directory) is an error matching fsutil.ErrNotRegular, at once.
func readStateFile(path, envID string) (State, error) {
	data, err := fsutil.ReadRegular(path, maxStateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return State{Schema: stateSchema, EnvID: envID}, nil
	case errors.Is(err, fsutil.ErrNotRegular):
		// No state is in it, and waiting does not make it a file: not a 75.
		return State{}, fmt.Errorf("read state: %w: remove it; the next run rebuilds the state from the live release", err)
	case errors.Is(err, fsutil.ErrTooLarge):
		return State{}, &corruptError{path: path, err: fmt.Errorf("larger than %d bytes", maxStateFile)}
	case err != nil:
		return State{}, fmt.Errorf("read state %s: %w: %w", path, ErrStateUnreadable, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, &corruptError{path: path, err: err}
	}
	return st, nil
}

// corruptError is a state.json that reads but does not parse; it matches
// ErrStateCorrupt.
type corruptError struct {
	path string
	err  error
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("state %s is corrupt (%v): the next run moves it aside and rebuilds it from the live release", e.path, e.err)
}

func (e *corruptError) Unwrap() []error { return []error{ErrStateCorrupt, e.err} }

// saveStateFile writes st to path atomically with mode 0600, for the box serving envID,
// through redact (which replaces every secret value the caller knows). What must
// survive a state.json that does not parse (keptState) goes first to keepPath, when
// it changed, so that one bad write of either file never loses it.
func saveStateFile(path, keepPath, envID string, st *State, redact func([]byte) []byte) error {
	st.Schema = stateSchema
	st.EnvID = envID
	if err := saveKept(keepPath, st, redact); err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	data = redact(append(data, '\n'))
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("write state %s: %w", path, err)
	}
	return nil
}

// keptState is what of the state must survive a state.json that does not parse,
// kept in a file of its own (Config.KeepPath): the replay ratchet, the memory of
// failed shas and the env-mismatch latch. Without it a corrupt state.json would let
// an older signed serial apply again, spend leases on shas that failed, and lift the
// latch.
type keptState struct {
	Schema        int                `json:"schema"`
	EnvID         string             `json:"env_id"`
	SignedSerials bundle.Serials     `json:"signed_serials,omitempty"`
	Failed        map[string]Failure `json:"failed,omitempty"`
	EnvMismatch   *Latch             `json:"env_mismatch,omitempty"`
}

// saveKept writes the kept part of st to path (0600, atomically) when it differs from
// what the file holds: the idle tick writes nothing.
func saveKept(path string, st *State, redact func([]byte) []byte) error {
	k := keptState{Schema: stateSchema, EnvID: st.EnvID, SignedSerials: st.SignedSerials, Failed: st.Failed, EnvMismatch: st.EnvMismatch}
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the kept state: %w", err)
	}
	data = redact(append(data, '\n'))
	if old, err := fsutil.ReadRegular(path, maxStateFile); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("write the kept state %s: %w", path, err)
	}
	return nil
}

// readKept reads what the kept file at path holds; a missing file is nothing kept.
func readKept(path string) (keptState, error) {
	var k keptState
	data, err := fsutil.ReadRegular(path, maxStateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return k, nil
	case err != nil:
		return k, err
	}
	if err := json.Unmarshal(data, &k); err != nil {
		return keptState{}, fmt.Errorf("%s does not parse: %w", path, err)
	}
	return k, nil
}

// LeaseRecord is a deploy lease the box took: which sha, when, and until when its
// grant was valid. The grant itself is never kept (it was used by the login); the
// token the login gave is bao.token.
type LeaseRecord struct {
	SHA       string    `json:"sha"`
	At        time.Time `json:"at"`
	ExpiresAt time.Time `json:"expires_at"`
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

// readTokenFile reads the OpenBao token file at path, trimmed (trimSecret); a missing
// file is "". A file that holds no possible token (empty once trimmed, larger than
// maxTokenFile, a byte that is not printable ASCII) is an error matching
// ErrTokenCorrupt that says why and never what it holds; a path that is not a regular
// file is an error matching fsutil.ErrNotRegular. The caller registers the token with
// its redactor.
func readTokenFile(path string) (string, error) {
	data, err := fsutil.ReadRegular(path, maxTokenFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, fsutil.ErrTooLarge):
		return "", &tokenCorruptError{path: path, why: fmt.Sprintf("larger than %d bytes", maxTokenFile)}
	case errors.Is(err, fsutil.ErrNotRegular):
		return "", err // it names the path and what is there
	case err != nil:
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := trimSecret(data)
	if len(tok) == 0 {
		return "", &tokenCorruptError{path: path, why: "empty"}
	}
	for _, c := range tok {
		if c < 0x20 || c > 0x7e {
			return "", &tokenCorruptError{path: path, why: "not printable ASCII"}
		}
	}
	return string(tok), nil
}

// tokenCorruptError is a token file that holds no possible token; it matches
// ErrTokenCorrupt.
type tokenCorruptError struct {
	path, why string
}

func (e *tokenCorruptError) Error() string {
	return fmt.Sprintf("the OpenBao token file %s is corrupt (%s)", e.path, e.why)
}

func (e *tokenCorruptError) Is(target error) bool { return target == ErrTokenCorrupt }

// trimSecret trims the line ends and blanks around a secret read from a file (a token,
// a grant), and nothing inside it.
func trimSecret(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}
