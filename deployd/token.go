package deployd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/scrub"
)

// maxGrantFile bounds the bootstrap grant file: a JWT of a few hundred bytes.
const maxGrantFile = 64 << 10

// ensureToken makes sure a usable OpenBao token is stored: bootstrap from the grant
// file when there is none (or it is invalid), renew it when a third of its TTL is left.
// baoDown is true when OpenBao was unreachable or sealed: the stored token is used.
func (a *Agent) ensureToken(ctx context.Context, st *State) (baoDown bool, err error) {
	tok, err := a.readToken()
	switch {
	case errors.Is(err, ErrTokenCorrupt):
		// What a crash can leave: as good as no token, and never sent.
		if a.grantPresent() {
			a.log.Warn("the OpenBao token file is corrupt; bootstrapping from the grant file",
				"token_file", a.cfg.TokenPath(), "err", err, "grant", a.cfg.BootstrapGrant)
			return false, a.bootstrapFromGrant(ctx, st, a.cfg.BootstrapGrant)
		}
		return false, &Error{Op: "token", Code: codes.Unauthenticated, Err: fmt.Errorf(
			"%w: place a fresh bootstrap grant at %s and run `monky-deployd bootstrap`", err, a.cfg.BootstrapGrant)}
	case err != nil:
		return false, &Error{Op: "token", Code: codes.StateUnavailable, Err: err}
	}
	if tok.IsZero() {
		return false, a.bootstrapFromGrant(ctx, st, a.cfg.BootstrapGrant)
	}
	info, err := a.bao.LookupSelf(ctx, tok)
	switch {
	case err == nil:
	case IsTemporary(err):
		// The check-in is the heartbeat: go on with the stored token; what needs
		// OpenBao later fails as temporary on its own.
		a.log.Warn("OpenBao unreachable or sealed; could not look up the token, checking in with the stored one", "err", err)
		return true, nil
	case errors.Is(err, bao.ErrUnauthenticated):
		if a.grantPresent() {
			a.log.Warn("the stored OpenBao token is no longer valid; bootstrapping from the grant file", "grant", a.cfg.BootstrapGrant)
			return false, a.bootstrapFromGrant(ctx, st, a.cfg.BootstrapGrant)
		}
		return false, &Error{Op: "token lookup", Code: codes.Unauthenticated, Err: fmt.Errorf(
			"the stored OpenBao token is invalid or expired: place a fresh bootstrap grant at %s and run `monky-deployd bootstrap`: %w",
			a.cfg.BootstrapGrant, err)}
	default:
		return false, &Error{Op: "token lookup", Err: err}
	}
	st.TokenExpires = info.ExpireTime
	if info.NeedsRenew(a.now()) {
		renewed, rerr := a.bao.RenewSelf(ctx, tok)
		if rerr != nil {
			a.log.Warn("could not renew the OpenBao token; it stays valid until it expires", "expires", info.ExpireTime, "err", rerr)
			return false, nil
		}
		st.TokenExpires = renewed.ExpireTime
		a.log.Info("renewed the OpenBao token", "expires", renewed.ExpireTime)
	}
	return false, nil
}

// grantPresent reports whether something is at the grant path: a file to bootstrap
// from, or what bootstrapFromGrant refuses, naming it (a fifo, a file it cannot read).
func (a *Agent) grantPresent() bool {
	_, err := os.Stat(a.cfg.BootstrapGrant)
	return !errors.Is(err, fs.ErrNotExist)
}

var (
	// ErrNoGrant: a bootstrap found no grant to log in with (a token may be stored).
	ErrNoGrant = errors.New("no bootstrap grant")
	// ErrGrantMalformed: the grant file does not hold a JWT with an env_id claim.
	ErrGrantMalformed = errors.New("the bootstrap grant is malformed")
	// ErrGrantOtherEnv: the grant's env_id claim is not the config's env_id.
	ErrGrantOtherEnv = errors.New("the bootstrap grant is for another env")
	// ErrGrantExpired: the grant's exp claim has passed (beyond grantClockSkew).
	ErrGrantExpired = errors.New("the bootstrap grant has expired")
)

// grantClockSkew is how far past its exp claim a grant is still handed to OpenBao,
// which has the last word: the box's clock may be a little ahead.
const grantClockSkew = time.Minute

// BootstrapOptions are the choices of a bootstrap.
type BootstrapOptions struct {
	// Grant is the grant file; "" is the config's bootstrap_grant.
	Grant string
	// Force logs in with the grant even when the stored token is valid.
	Force bool
}

// BootstrapResult is what a bootstrap did.
type BootstrapResult struct {
	// Already is true when the box held a valid token of its env and the bootstrap
	// did nothing: no login, no check-in, the grant (if any) left where it is.
	Already bool
	// Action and NextCheckin are the answer of the check-in that confirmed a new
	// token; empty when Already.
	Action      string
	NextCheckin time.Duration
	// TokenExpires is when the stored token expires.
	TokenExpires time.Time
}

// Bootstrap is BootstrapWith the grant at grantPath (the config's bootstrap_grant
// when empty), without Force: it consumes the grant, stores the resulting token and
// confirms it with a check-in, unless the box is already bootstrapped.
func (a *Agent) Bootstrap(ctx context.Context, grantPath string) (Outcome, error) {
	res, err := a.BootstrapWith(ctx, BootstrapOptions{Grant: grantPath})
	return Outcome{Action: res.Action, NextCheckin: res.NextCheckin}, err
}

// BootstrapWith logs into OpenBao with the grant, stores the resulting token, consumes
// the grant and confirms the token with a check-in. A box already bootstrapped (its
// stored token valid, of its env, not latched) is left as it is unless o.Force: the
// result says Already (a stored token OpenBao cannot judge, sealed or unreachable, is
// a temporary error: nothing is consumed). The grant is checked before the login (a
// JWT whose env_id claim is the config's and whose exp has not passed; OpenBao
// verifies the rest) and is kept when it is refused, by that check or by OpenBao.
// From the grant on, a bootstrap is a run: the state records its exit and code; one
// that succeeds clears the AGENT_ENV_MISMATCH latch, a failed one leaves it.
func (a *Agent) BootstrapWith(ctx context.Context, o BootstrapOptions) (BootstrapResult, error) {
	start := a.now()
	grantPath := o.Grant
	if grantPath == "" {
		grantPath = a.cfg.BootstrapGrant
	}
	if err := fsutil.MkdirMode(a.cfg.StateDir, 0o700); err != nil {
		return BootstrapResult{}, &Error{Op: "state directory", Code: codes.StateUnavailable, Err: err}
	}
	lock, err := fsutil.TryLock(a.cfg.LockPath())
	if errors.Is(err, fsutil.ErrLocked) {
		return BootstrapResult{}, &Error{Op: "run lock", Code: codes.Locked, Err: ErrLocked}
	}
	if err != nil {
		return BootstrapResult{}, &Error{Op: "run lock", Code: codes.StateUnavailable, Err: err}
	}
	defer func() { _ = lock.Unlock() }()
	st, err := a.loadState()
	if err != nil {
		return BootstrapResult{}, err
	}
	if !o.Force {
		info, bootstrapped, err := a.storedTokenGood(ctx, &st)
		if err != nil {
			return BootstrapResult{}, err
		}
		if bootstrapped {
			return a.alreadyBootstrapped(&st, info, grantPath)
		}
	}
	var res BootstrapResult
	err = a.bootstrapFromGrant(ctx, &st, grantPath)
	if err == nil {
		var inst tenancy.Instruction
		inst, err = a.checkin(ctx, &st)
		res.Action = string(inst.Action)
		res.NextCheckin = inst.NextCheckin
	}
	res.TokenExpires = st.TokenExpires
	endRun(&st, start, a.now(), "", err, a.red.Redact)
	if serr := a.saveState(&st); serr != nil && err == nil {
		err = &Error{Op: "save state", Code: codes.StateUnavailable, Err: serr}
	}
	return res, err
}

// alreadyBootstrapped ends a bootstrap of a box whose stored token is good (info):
// nothing is done but noting the token's expiry.
func (a *Agent) alreadyBootstrapped(st *State, info bao.TokenInfo, grantPath string) (BootstrapResult, error) {
	st.TokenExpires = info.ExpireTime
	if err := a.saveState(st); err != nil {
		return BootstrapResult{}, &Error{Op: "save state", Code: codes.StateUnavailable, Err: err}
	}
	a.log.Info("already bootstrapped: the stored OpenBao token is valid; nothing done, the grant (if any) is left where it is. To log in with the grant anyway: monky-deployd bootstrap --force",
		"token_file", a.cfg.TokenPath(), "expires", info.ExpireTime, "grant", grantPath)
	return BootstrapResult{Already: true, TokenExpires: info.ExpireTime}, nil
}

// storedTokenGood reports whether the box is bootstrapped: its stored token is valid
// (lookup-self), of its env and not latched. A missing, corrupt, invalid or foreign
// token is not, and is no error: the grant replaces it. A token file that cannot be
// read, or an OpenBao that cannot say, is an error: nothing is consumed.
func (a *Agent) storedTokenGood(ctx context.Context, st *State) (bao.TokenInfo, bool, error) {
	tok, err := a.readToken()
	switch {
	case errors.Is(err, ErrTokenCorrupt):
		a.log.Warn("the OpenBao token file is corrupt; bootstrapping from the grant", "token_file", a.cfg.TokenPath(), "err", err)
		return bao.TokenInfo{}, false, nil
	case err != nil:
		return bao.TokenInfo{}, false, &Error{Op: "token", Code: codes.StateUnavailable, Err: err}
	case tok.IsZero():
		return bao.TokenInfo{}, false, nil
	}
	if l := st.EnvMismatch; l != nil && l.EnvID == a.cfg.EnvID {
		return bao.TokenInfo{}, false, nil
	}
	info, err := a.bao.LookupSelf(ctx, tok)
	switch {
	case err == nil:
	case errors.Is(err, bao.ErrUnauthenticated):
		a.log.Info("the stored OpenBao token is no longer valid; bootstrapping from the grant", "token_file", a.cfg.TokenPath())
		return bao.TokenInfo{}, false, nil
	default:
		return bao.TokenInfo{}, false, &Error{Op: "token lookup", Err: fmt.Errorf(
			"cannot tell whether the stored OpenBao token is valid; nothing was done, the grant was kept (run again, or bootstrap --force to log in anyway): %w", err)}
	}
	if info.EnvID != "" && info.EnvID != a.cfg.EnvID {
		a.log.Warn("the stored OpenBao token is of another env; bootstrapping from the grant", "token_env_id", info.EnvID)
		return bao.TokenInfo{}, false, nil
	}
	return info, true, nil
}

func (a *Agent) bootstrapFromGrant(ctx context.Context, st *State, path string) error {
	data, err := fsutil.ReadRegular(path, maxGrantFile)
	if errors.Is(err, fs.ErrNotExist) {
		tok, terr := a.readToken()
		if errors.Is(terr, ErrTokenCorrupt) {
			return &Error{Op: "bootstrap", Code: codes.Unauthenticated, Err: fmt.Errorf(
				"%w at %s, and %w: ask monky-tenancy for a bootstrap grant, place it there (mode 0600) and run `monky-deployd bootstrap`",
				ErrNoGrant, path, terr)}
		}
		if terr == nil && !tok.IsZero() {
			// A token is stored (invalid, or a forced bootstrap): say what is missing.
			return &Error{Op: "bootstrap", Code: codes.Unauthenticated, Err: fmt.Errorf(
				"%w at %s (the token at %s is left as it is); ask monky-tenancy for a bootstrap grant, place it there (mode 0600) and run `monky-deployd bootstrap`",
				ErrNoGrant, path, a.cfg.TokenPath())}
		}
		a.log.Error("no OpenBao token and no bootstrap grant: ask monky-tenancy for a bootstrap grant, place it at the grant path (mode 0600) and run `monky-deployd bootstrap`",
			"token_file", a.cfg.TokenPath(), "grant", path)
		return &Error{Op: "bootstrap", Code: codes.Unauthenticated, Err: fmt.Errorf(
			"%w: no token at %s and no grant at %s; ask monky-tenancy for a bootstrap grant and place it there (mode 0600)",
			ErrNoCredentials, a.cfg.TokenPath(), path)}
	}
	if err != nil {
		// A fifo, a directory, a file too large or unreadable: named, and kept.
		return &Error{Op: "bootstrap", Code: codes.Unauthenticated, Err: fmt.Errorf(
			"read grant: %w; place a fresh bootstrap grant there (a regular file, mode 0600)", err)}
	}
	raw := string(trimSecret(data))
	a.red.Add(raw)
	if raw == "" {
		return &Error{Op: "bootstrap", Code: codes.Unauthenticated, Err: fmt.Errorf(
			"%w: the grant file %s is empty; place a fresh bootstrap grant there", ErrNoCredentials, path)}
	}
	if err := checkGrant(raw, a.cfg.EnvID, a.now()); err != nil {
		return &Error{Op: "bootstrap", Code: codes.Unauthenticated, Err: fmt.Errorf(
			"the grant at %s %w; the grant was kept, nothing was sent", path, err)}
	}
	info, err := a.bao.Login(ctx, secret.New(raw))
	if err != nil {
		return &Error{Op: "bootstrap login", Err: fmt.Errorf(
			"OpenBao refused the bootstrap grant at %s (the grant was kept): %w", path, err)}
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

// grantError is a grant refused before the login; its text completes "the grant at
// <path> …" and never quotes the grant.
type grantError struct {
	kind error
	msg  string
}

func (e *grantError) Error() string { return e.msg }

func (e *grantError) Unwrap() error { return e.kind }

// checkGrant reads the claims of the JWT grant without verifying it (OpenBao does):
// its env_id must be envID, and its exp, when it has one, not more than grantClockSkew
// before now. The error completes "the grant at <path> …".
func checkGrant(grant, envID string, now time.Time) error {
	parts := strings.Split(grant, ".")
	if len(parts) != 3 {
		return &grantError{ErrGrantMalformed, "is not a JWT (three base64url parts separated by dots)"}
	}
	body, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return &grantError{ErrGrantMalformed, "is not a JWT: its claims are not base64url"}
	}
	var claims struct {
		EnvID *string      `json:"env_id"`
		Exp   *json.Number `json:"exp"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return &grantError{ErrGrantMalformed, "is not a JWT: its claims are not JSON"}
	}
	// maxClaimText bounds a claim's value in a message: the grant is untrusted text.
	const maxClaimText = 64
	if claims.EnvID == nil || *claims.EnvID == "" {
		return &grantError{ErrGrantMalformed, "has no env_id claim: it is no bootstrap grant of monky-tenancy"}
	}
	if *claims.EnvID != envID {
		return &grantError{ErrGrantOtherEnv, fmt.Sprintf(
			"is for env %s, and this box is %s (env_id of the config): place a grant of %s there, or fix env_id",
			scrub.Text(*claims.EnvID, maxClaimText), envID, envID)}
	}
	if claims.Exp != nil {
		exp, err := claims.Exp.Float64()
		if err != nil {
			return &grantError{ErrGrantMalformed, "is not a JWT: its exp claim is not a number"}
		}
		at := time.Unix(int64(exp), 0).UTC()
		if now.After(at.Add(grantClockSkew)) {
			return &grantError{ErrGrantExpired, fmt.Sprintf(
				"expired at %s: ask monky-tenancy for a fresh bootstrap grant (and check the box's clock)", at.Format(time.RFC3339))}
		}
	}
	return nil
}

// replaceToken stores the token of a fresh login and revokes the one it replaces:
// one token at a time.
func (a *Agent) replaceToken(ctx context.Context, info bao.TokenInfo) error {
	old, _ := a.readToken()
	if err := a.writeToken(info.Token); err != nil {
		return &Error{Op: "store token", Code: codes.StateUnavailable, Err: err}
	}
	if !old.IsZero() && old.Reveal() != info.Token.Reveal() {
		if err := a.bao.RevokeSelf(ctx, old); err != nil && !errors.Is(err, bao.ErrUnauthenticated) {
			a.log.Warn("could not revoke the replaced OpenBao token; it expires on its own", "err", err)
		}
	}
	return nil
}
