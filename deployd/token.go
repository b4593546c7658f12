package deployd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// maxGrantFile bounds the bootstrap grant file: a JWT of a few hundred bytes.
const maxGrantFile = 64 << 10

// ensureToken is the tick's token upkeep; it notes when OpenBao was down.
func (t *tick) ensureToken(ctx context.Context) error {
	down, err := t.a.ensureToken(ctx, t.st)
	t.baoDown = down
	if err != nil {
		noteFailure(t.st, err)
	}
	return err
}

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
	case bao.IsTemporary(err):
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
		return false, &Error{Op: "token lookup", Code: CodeOf(err), Err: err}
	}
	a.noteToken(st, info)
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

// noteToken records what a lookup or a login said of the token: when it expires.
func (a *Agent) noteToken(st *State, info bao.TokenInfo) {
	st.TokenExpires = info.ExpireTime
}

// Bootstrap consumes the grant at grantPath (the config's bootstrap_grant when
// empty), stores the resulting token and confirms it with a check-in.
func (a *Agent) Bootstrap(ctx context.Context, grantPath string) (Outcome, error) {
	if grantPath == "" {
		grantPath = a.cfg.BootstrapGrant
	}
	if err := fsutil.MkdirMode(a.cfg.StateDir, 0o700); err != nil {
		return Outcome{}, &Error{Op: "state directory", Code: codes.StateUnavailable, Err: err}
	}
	lock, err := fsutil.TryLock(a.cfg.LockPath())
	if errors.Is(err, fsutil.ErrLocked) {
		return Outcome{}, &Error{Op: "run lock", Code: codes.Locked, Err: ErrLocked}
	}
	if err != nil {
		return Outcome{}, &Error{Op: "run lock", Code: codes.StateUnavailable, Err: err}
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
	var temporary codes.Code
	var retryAfter time.Duration
	if IsTemporary(err) {
		temporary = CodeOf(err)
		retryAfter, _ = tenancy.RetryAfter(err)
	}
	endRun(&st, a.now(), ExitCode(err), CodeOf(err), temporary, retryAfter)
	if serr := a.saveState(&st); serr != nil && err == nil {
		err = &Error{Op: "save state", Code: codes.StateUnavailable, Err: serr}
	}
	return out, err
}

func (a *Agent) bootstrapFromGrant(ctx context.Context, st *State, path string) error {
	data, err := fsutil.ReadRegular(path, maxGrantFile)
	if errors.Is(err, fs.ErrNotExist) {
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
	info, err := a.bao.Login(ctx, secret.New(raw))
	if err != nil {
		return &Error{Op: "bootstrap login", Code: CodeOf(err), Err: fmt.Errorf("OpenBao refused the bootstrap grant at %s: %w", path, err)}
	}
	if err := a.replaceToken(ctx, info); err != nil {
		return err
	}
	a.noteToken(st, info)
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
		return &Error{Op: "store token", Code: codes.StateUnavailable, Err: err}
	}
	if !old.IsZero() && old.Reveal() != info.Token.Reveal() {
		if err := a.bao.RevokeSelf(ctx, old); err != nil && !errors.Is(err, bao.ErrUnauthenticated) {
			a.log.Warn("could not revoke the replaced OpenBao token; it expires on its own", "err", err)
		}
	}
	return nil
}
