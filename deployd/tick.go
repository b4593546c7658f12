package deployd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// Outcome is what one tick did.
type Outcome struct {
	// Action is the check-in's action ("apply", "none", "down"), or "" when the tick
	// stopped before tenancy answered.
	Action string `json:"action,omitempty"`
	// Result is what was reported ("applied", "failed", "down"), or "" when nothing was.
	Result string `json:"result,omitempty"`
	// Code is the stable code of a failure or refusal.
	Code string `json:"code,omitempty"`
	// Detail names what failed (files, variables, services), never a value.
	Detail string `json:"detail,omitempty"`
	// SHA and Serial identify the bundle the tick worked on; with down, the release
	// taken down ("" and 0 when nothing was live), as the report says.
	SHA    string `json:"sha,omitempty"`
	Serial int64  `json:"serial,omitempty"`
	// Restore is what became of the box after an apply that failed after promote
	// (RestoreHealthy, RestoreUnhealthy, RestoreFailed, RestoreNone); "" otherwise.
	Restore string `json:"restore,omitempty"`
	// Leased is true when the tick took a deploy lease.
	Leased bool `json:"leased"`
	// NextCheckin is the interval tenancy asked for.
	NextCheckin time.Duration `json:"next_checkin_ns,omitempty"`
	// Duration is how long the tick took.
	Duration time.Duration `json:"duration_ns"`
}

// Tick runs one tick: lock, state, token upkeep, check-in, then apply, nothing or
// down, and the report. The error maps onto the exit code contract with ExitCode.
func (a *Agent) Tick(ctx context.Context) (Outcome, error) {
	start := a.now()
	var out Outcome
	if err := mkdirMode(a.cfg.StateDir, 0o700); err != nil {
		return out, &Error{Op: "state directory", Code: CodeStateUnavailable, Err: err}
	}
	lock, err := fsutil.TryLock(a.cfg.LockPath())
	if errors.Is(err, fsutil.ErrLocked) {
		a.log.Warn("another monky-deployd run holds the lock; this run exits 75 and the next tick tries again",
			"lock", a.cfg.LockPath())
		return out, &Error{Op: "run lock", Code: CodeLocked, Err: ErrLocked}
	}
	if err != nil {
		return out, &Error{Op: "run lock", Code: CodeStateUnavailable, Err: err}
	}
	defer func() { _ = lock.Unlock() }()

	st, err := a.loadState()
	if err != nil {
		return out, err
	}
	if l := st.EnvMismatch; l != nil {
		if l.EnvID == a.cfg.EnvID {
			a.log.Error("AGENT_ENV_MISMATCH latched: tenancy says this box's token belongs to another environment; not contacting the network. Fix env_id in the config or bootstrap with a fresh grant for this env",
				"latched_at", l.At, "message", l.Message)
			return out, &Error{Op: "env mismatch latch", Code: CodeEnvMismatch, Err: ErrEnvMismatch}
		}
		a.log.Info("env_id changed since the AGENT_ENV_MISMATCH latch; clearing it", "latched_env_id", l.EnvID)
		st.EnvMismatch = nil
	}
	a.repair(&st)

	out, err = a.tick(ctx, &st)
	if err != nil && out.Code == "" {
		out.Code = CodeOf(err)
	}
	st.LastTemporary = ""
	if IsTemporary(err) {
		st.LastTemporary = CodeOf(err)
	}
	out.Duration = a.now().Sub(start)
	st.LastTick = a.now()
	st.LastExit = ExitCode(err)
	if serr := a.saveState(&st); serr != nil {
		a.log.Error("could not save the state; the next tick rebuilds it from the live release", "err", serr)
		if err == nil {
			err = &Error{Op: "save state", Code: CodeStateUnavailable, Err: serr}
		}
	}
	return out, err
}

func (a *Agent) tick(ctx context.Context, st *State) (Outcome, error) {
	var out Outcome
	a.baoDown = false
	if err := a.ensureToken(ctx, st); err != nil {
		return out, err
	}
	inst, err := a.checkin(ctx, st)
	if err != nil {
		return out, err
	}
	out.Action = string(inst.Action)
	out.NextCheckin = inst.NextCheckin
	switch inst.Action {
	case tenancy.ActionNone:
		a.log.Debug("check-in: nothing to do", "live_sha", st.LiveSHA)
		return out, nil
	case tenancy.ActionDown:
		return a.down(ctx, st, inst, out)
	case tenancy.ActionApply:
		return a.apply(ctx, st, inst, out)
	default:
		return out, &Error{Op: "check-in", Code: CodeUnavailable, Err: fmt.Errorf("unknown action %q", inst.Action)}
	}
}

// repair makes the state agree with the disk after a crash: `current` is the truth
// about the live release; half-staged releases and partial downloads are removed.
func (a *Agent) repair(st *State) {
	rel := a.cfg.ReleasesDir()
	entries, err := os.ReadDir(rel)
	if err == nil {
		for _, e := range entries {
			if sha, ok := strings.CutSuffix(e.Name(), ".old"); ok && strings.HasPrefix(sha, ".") && isSHA(sha[1:]) {
				sha = sha[1:]
				// A restage interrupted between its two renames: the kept copy goes back.
				p, final := filepath.Join(rel, e.Name()), filepath.Join(rel, sha)
				if _, err := os.Lstat(final); errors.Is(err, fs.ErrNotExist) {
					if rerr := os.Rename(p, final); rerr != nil {
						a.log.Warn("could not put back a release moved aside by an interrupted restage", "path", p, "err", rerr)
					} else {
						_ = fsutil.SyncDir(rel)
						a.log.Info("put back a release moved aside by an interrupted restage", "sha", short(sha))
						continue
					}
				}
			}
			if strings.HasPrefix(e.Name(), ".") {
				p := filepath.Join(rel, e.Name())
				if rerr := os.RemoveAll(p); rerr != nil {
					a.log.Warn("could not remove a leftover of an interrupted apply", "path", p, "err", rerr)
				} else {
					a.log.Info("removed a leftover of an interrupted apply", "path", p)
				}
			}
		}
	}
	sha := a.liveSHA()
	if sha == st.LiveSHA {
		return
	}
	a.log.Warn("state and the live release disagree (an interrupted apply or down); trusting the current symlink",
		"state_live_sha", st.LiveSHA, "current_sha", sha)
	if sha == "" {
		st.LiveSHA, st.LiveSerial, st.Confirmed = "", 0, false
		return
	}
	if st.PreviousSHA == sha {
		st.PreviousSHA = ""
	} else if st.LiveSHA != "" {
		st.PreviousSHA = st.LiveSHA
	}
	st.LiveSHA = sha
	st.LiveSerial = a.releaseSerial(sha)
	st.Confirmed = false
}

// liveSHA is the sha `current` points to, or "".
func (a *Agent) liveSHA() string {
	target, err := os.Readlink(a.cfg.CurrentLink())
	if err != nil {
		return ""
	}
	sha := filepath.Base(target)
	if !isSHA(sha) {
		return ""
	}
	if _, err := os.Stat(filepath.Join(a.cfg.ReleasesDir(), sha)); err != nil {
		return ""
	}
	return sha
}

func isSHA(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ensureToken makes sure a usable OpenBao token is stored: bootstrap from the grant
// file when there is none (or it is invalid), renew it when a third of its TTL is left.
func (a *Agent) ensureToken(ctx context.Context, st *State) error {
	tok, err := a.readToken()
	if err != nil {
		return &Error{Op: "token", Code: CodeStateUnavailable, Err: err}
	}
	if tok.IsZero() {
		return a.bootstrapFromGrant(ctx, st, a.cfg.BootstrapGrant)
	}
	info, err := a.bao.LookupSelf(ctx, tok)
	switch {
	case err == nil:
	case bao.IsTemporary(err):
		// The check-in is the heartbeat: go on with the stored token; what needs
		// OpenBao later fails as temporary on its own.
		a.log.Warn("OpenBao unreachable or sealed; could not look up the token, checking in with the stored one", "err", err)
		a.baoDown = true
		return nil
	case errors.Is(err, bao.ErrUnauthenticated):
		if _, gerr := os.Stat(a.cfg.BootstrapGrant); gerr == nil {
			a.log.Warn("the stored OpenBao token is no longer valid; bootstrapping from the grant file", "grant", a.cfg.BootstrapGrant)
			return a.bootstrapFromGrant(ctx, st, a.cfg.BootstrapGrant)
		}
		return &Error{Op: "token lookup", Code: CodeUnauthenticated, Err: fmt.Errorf(
			"the stored OpenBao token is invalid or expired: place a fresh bootstrap grant at %s and run `monky-deployd bootstrap`: %w",
			a.cfg.BootstrapGrant, err)}
	default:
		return &Error{Op: "token lookup", Code: CodeOf(err), Err: err}
	}
	st.TokenExpires = info.ExpireTime
	if info.NeedsRenew(a.now()) {
		renewed, rerr := a.bao.RenewSelf(ctx, tok)
		if rerr != nil {
			a.log.Warn("could not renew the OpenBao token; it stays valid until it expires", "expires", info.ExpireTime, "err", rerr)
			return nil
		}
		st.TokenExpires = renewed.ExpireTime
		a.log.Info("renewed the OpenBao token", "expires", renewed.ExpireTime)
	}
	return nil
}

// Bootstrap consumes the grant at grantPath (the config's bootstrap_grant when
// empty), stores the resulting token and confirms it with a check-in.
func (a *Agent) Bootstrap(ctx context.Context, grantPath string) (Outcome, error) {
	if grantPath == "" {
		grantPath = a.cfg.BootstrapGrant
	}
	if err := mkdirMode(a.cfg.StateDir, 0o700); err != nil {
		return Outcome{}, &Error{Op: "state directory", Code: CodeStateUnavailable, Err: err}
	}
	lock, err := fsutil.TryLock(a.cfg.LockPath())
	if errors.Is(err, fsutil.ErrLocked) {
		return Outcome{}, &Error{Op: "run lock", Code: CodeLocked, Err: ErrLocked}
	}
	if err != nil {
		return Outcome{}, &Error{Op: "run lock", Code: CodeStateUnavailable, Err: err}
	}
	defer func() { _ = lock.Unlock() }()
	st, err := a.loadState()
	if err != nil {
		return Outcome{}, err
	}
	// A bootstrap that succeeds clears the latch (bootstrapFromGrant); a failed one
	// leaves it, so that later runs still exit 78 without the network.
	var out Outcome
	err = a.bootstrapFromGrant(ctx, &st, grantPath)
	if err == nil {
		var inst tenancy.Instruction
		inst, err = a.checkin(ctx, &st)
		out.Action = string(inst.Action)
		out.NextCheckin = inst.NextCheckin
	}
	st.LastTick = a.now()
	if serr := a.saveState(&st); serr != nil && err == nil {
		err = &Error{Op: "save state", Code: CodeStateUnavailable, Err: serr}
	}
	return out, err
}

func (a *Agent) bootstrapFromGrant(ctx context.Context, st *State, path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		a.log.Error("no OpenBao token and no bootstrap grant: ask monky-tenancy for a bootstrap grant, place it at the grant path (mode 0600) and run `monky-deployd bootstrap`",
			"token_file", a.cfg.TokenPath(), "grant", path)
		return &Error{Op: "bootstrap", Code: CodeUnauthenticated, Err: fmt.Errorf(
			"%w: no token at %s and no grant at %s; ask monky-tenancy for a bootstrap grant and place it there (mode 0600)",
			ErrNoCredentials, a.cfg.TokenPath(), path)}
	}
	if err != nil {
		return &Error{Op: "bootstrap", Code: CodeUnauthenticated, Err: fmt.Errorf("read grant %s: %w", path, err)}
	}
	raw := string(trimSpace(data))
	a.red.Add(raw)
	if raw == "" {
		return &Error{Op: "bootstrap", Code: CodeUnauthenticated, Err: fmt.Errorf(
			"%w: the grant file %s is empty; place a fresh bootstrap grant there", ErrNoCredentials, path)}
	}
	info, err := a.bao.Login(ctx, secret.New(raw))
	if err != nil {
		return &Error{Op: "bootstrap login", Code: CodeOf(err), Err: fmt.Errorf("OpenBao refused the bootstrap grant at %s: %w", path, err)}
	}
	if err := a.replaceToken(ctx, info); err != nil {
		return err
	}
	st.TokenExpires = info.ExpireTime
	st.EnvMismatch = nil
	// The grant is consumed: truncate it first so that a failed unlink leaves nothing usable.
	if err := os.Truncate(path, 0); err != nil {
		a.log.Warn("could not truncate the consumed bootstrap grant; remove it by hand", "grant", path, "err", err)
	}
	if err := os.Remove(path); err != nil {
		a.log.Warn("could not delete the consumed bootstrap grant; remove it by hand", "grant", path, "err", err)
	}
	a.log.Info("bootstrapped: stored a new OpenBao token and consumed the grant", "grant", path, "token_file", a.cfg.TokenPath(), "expires", info.ExpireTime)
	return nil
}

// replaceToken stores the token of a fresh login and revokes the one it replaces:
// one token at a time.
func (a *Agent) replaceToken(ctx context.Context, info bao.TokenInfo) error {
	old, _ := a.readToken()
	if err := a.writeToken(info.Token); err != nil {
		return &Error{Op: "store token", Code: CodeStateUnavailable, Err: err}
	}
	if !old.IsZero() && old.Reveal() != info.Token.Reveal() {
		if err := a.bao.RevokeSelf(ctx, old); err != nil && !errors.Is(err, bao.ErrUnauthenticated) {
			a.log.Warn("could not revoke the replaced OpenBao token; it expires on its own", "err", err)
		}
	}
	return nil
}

// checkin sends the heartbeat and returns tenancy's instruction.
func (a *Agent) checkin(ctx context.Context, st *State) (tenancy.Instruction, error) {
	free, _ := fsutil.FreeMB(existingParent(a.cfg.DeployDir))
	req := tenancy.Checkin{
		EnvID:         a.cfg.EnvID,
		AgentVersion:  Version,
		CurrentSHA:    st.LiveSHA,
		CurrentSerial: st.LiveSerial,
		LastResult:    tenancy.Result(st.LastResult),
		LastCode:      st.LastCode,
		Host:          tenancy.Host{Hostname: a.opts.Hostname, DockerVersion: a.dockerVersion(ctx, st), FreeMB: free},
	}
	inst, err := a.tenancy.Checkin(ctx, req)
	if err != nil {
		return inst, a.tenancyFailure(st, "check-in", err)
	}
	st.LastCheckin = a.now()
	st.LastAction = string(inst.Action)
	st.NextCheckin = inst.NextCheckin
	return inst, nil
}

// tenancyFailure classifies an error of a tenancy call, latching an env mismatch.
func (a *Agent) tenancyFailure(st *State, op string, err error) error {
	switch {
	case errors.Is(err, tenancy.ErrEnvMismatch):
		st.EnvMismatch = &Latch{EnvID: a.cfg.EnvID, At: a.now(), Message: a.red.Redact(err.Error())}
		st.LastCode = CodeEnvMismatch
		a.log.Error("tenancy answered AGENT_ENV_MISMATCH: this box's token belongs to another environment. Latched: later runs exit 78 without the network until env_id changes or you bootstrap with a grant for "+a.cfg.EnvID,
			"op", op, "err", err)
		return &Error{Op: op, Code: CodeEnvMismatch, Err: err}
	case errors.Is(err, tenancy.ErrUnauthenticated):
		a.log.Error("tenancy rejected the OpenBao token; place a fresh bootstrap grant and run `monky-deployd bootstrap`",
			"op", op, "grant", a.cfg.BootstrapGrant, "err", err)
		return &Error{Op: op, Code: CodeUnauthenticated, Err: err}
	case tenancy.IsTemporary(err):
		code := CodeUnavailable
		if errors.Is(err, tenancy.ErrRateLimited) {
			code = CodeRateLimited
		}
		a.log.Warn("tenancy unavailable; exiting 75, the next tick retries", "op", op, "code", code, "err", err)
		return &Error{Op: op, Code: code, Err: err}
	default:
		a.log.Error("tenancy call failed", "op", op, "err", err)
		return &Error{Op: op, Code: CodeOf(err), Err: err}
	}
}

func existingParent(p string) string {
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}
