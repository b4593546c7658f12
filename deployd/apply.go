package deployd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/plan"
	"github.com/monky/monky-deployd/internal/release"
)

// apply converges the box to the instruction's sha: check its signature, verify
// everything, pull its images, then lease, login, secrets, stage, promote, compose up and health
// (docs/ARCHITECTURE.md, "The tick as a sequence"). A step's error ends it; end
// decides what the error means.
func (t *tick) apply(ctx context.Context, inst tenancy.Instruction) error {
	t.out.SHA, t.out.Serial = inst.SHA, inst.Serial
	t.log = t.log.With("sha", release.Short(inst.SHA), "serial", inst.Serial)
	if done, err := t.shortcut(ctx, inst); done {
		return err
	}
	if c := t.st.Condition; c.Waiting(t.a.now()) {
		t.log.Warn("tenancy asked the box to wait; checked in, but neither downloading the bundle nor asking for a lease before then; exiting 75",
			"code", c.Code, "until", c.NextAttempt)
		return &waitError{code: c.Code, until: c.NextAttempt}
	}
	if c := t.deferral(inst); c != nil {
		return t.deferApply(ctx, inst, c) // prepared, not switched: defer.go
	}
	b, err := t.prepare(ctx, inst)
	if err != nil {
		return err
	}
	defer b.file.close()
	if err := t.baoReady(ctx); err != nil {
		return err
	}
	if err := t.secretsReady(ctx, b.res.Manifest); err != nil {
		return err
	}
	if err := t.boxReady(ctx); err != nil {
		return err
	}
	if err := t.pullImages(ctx, b.res.Images); err != nil {
		return err
	}
	token, err := t.leaseFor(ctx, inst.SHA)
	if err != nil {
		return err
	}
	values, err := t.secrets(ctx, token, b.res.Manifest)
	if err != nil {
		return err
	}
	if err := t.stage(ctx, b.file.File, inst.SHA, b.res.Manifest, values); err != nil {
		return err
	}
	if err := t.hooksBefore(ctx, inst.SHA, b.res.Manifest); err != nil {
		return err
	}
	if err := t.promote(inst.SHA, b.res.Manifest.Serial); err != nil {
		return err
	}
	if err := t.up(ctx, inst.SHA, b.res.Manifest, b.res.Services); err != nil {
		return err
	}
	if b.signedBy != "" {
		t.st.SignedSerials.Record(b.signedBy, inst.Serial)
	}
	return nil
}

// prepared is a published bundle checked as far as the box can without a lease:
// its signature, the download and every check of bundle.Verify. close removes the
// download.
type prepared struct {
	file     download
	res      *bundle.Result
	signedBy bundle.KeyID
}

// prepare is every step before the lease that reads the bundle and changes nothing
// on the box: the signature (with trusted_keys), the download, verify and the signed
// serial. A tick and a plan both run it, so a plan cannot drift from an apply.
func (t *tick) prepare(ctx context.Context, inst tenancy.Instruction) (*prepared, error) {
	signedBy, err := t.checkSignature(ctx, inst)
	if err != nil {
		return nil, err
	}
	f, err := t.fetch(ctx, inst.SHA) // a deferral's kept copy, or a download
	if err != nil {
		return nil, err
	}
	res, err := t.verify(ctx, f.File, inst)
	if err == nil {
		err = t.checkSignedSerial(ctx, inst, res.Manifest, signedBy)
	}
	if err != nil {
		f.close()
		return nil, err
	}
	return &prepared{file: f, res: res, signedBy: signedBy}, nil
}

// checkSignature is the first step of an apply on a box that trusts signing keys,
// before the download and the lease, so that a refusal costs neither (docs/BUNDLE.md,
// "On the box"): the signature tenancy publishes with the sha must be one of a
// trusted key for this env, sha and serial, not expired, and the serial no lower than
// the box applied under a key it trusts unless tenancy asks for a rollback. It
// returns the signing key's id; "" on a box that trusts no key, which asks for no
// signature. A refusal is a bundle refusal with its SIGNATURE_* code, reported and
// not remembered against the sha (faults).
func (t *tick) checkSignature(ctx context.Context, inst tenancy.Instruction) (bundle.KeyID, error) {
	keys := t.a.keys
	if keys.Len() == 0 {
		return "", nil
	}
	refuse := func(r bundle.Refusal) error {
		return t.refused(ctx, &bundle.RefusedError{SHA: inst.SHA, Refusals: []bundle.Refusal{r}})
	}
	sig, err := t.a.tenancy.Signature(ctx, inst.SHA)
	if errors.Is(err, tenancy.ErrSignatureTooLarge) {
		return "", refuse(bundle.Refusal{Code: codes.SignatureInvalid,
			Detail: fmt.Sprintf("the signature tenancy serves is longer than %d bytes: not a signature file", bundle.MaxSignatureSize)})
	}
	if err != nil {
		return "", t.tenancyFailure("signature", err)
	}
	want := bundle.Statement{SHA: inst.SHA, EnvID: t.a.cfg.EnvID, Serial: inst.Serial}
	id, err := bundle.CheckSignature(sig.Data, keys, want, t.a.now())
	if err == nil {
		err = bundle.CheckReplay(t.st.SignedSerials, keys, inst.Serial, inst.Rollback)
	}
	var se *bundle.SignatureError
	switch {
	case errors.As(err, &se):
		return "", refuse(se.Refusal())
	case err != nil: // the expected statement or the clock: not the signature's fault
		return "", &Error{Op: "signature", Code: codes.SignatureInvalid, Err: err}
	}
	t.log.Info("signature checked: signed by a trusted key for this env, sha and serial; downloading the bundle", "key_id", id)
	return id, nil
}

// checkSignedSerial refuses, after Verify, a signed bundle whose manifest names
// another serial than the one tenancy asked for and the signature is of: the
// signature vouches for the sha at that serial, and the release is promoted under the
// manifest's.
func (t *tick) checkSignedSerial(ctx context.Context, inst tenancy.Instruction, m bundle.Manifest, signedBy bundle.KeyID) error {
	if signedBy == "" || m.Serial == inst.Serial {
		return nil
	}
	return t.refused(ctx, &bundle.RefusedError{SHA: inst.SHA, Refusals: []bundle.Refusal{{Code: codes.SignatureInvalid,
		Detail: fmt.Sprintf("the manifest's serial %d is not serial %d, the one the check-in and the signature (key %s) name", m.Serial, inst.Serial, signedBy)}}})
}

// shortcut handles an apply that needs no lease: the live, confirmed sha (report
// applied again), a sha that failed before (told again unless tenancy asks for a
// retry or makes a refused rollback explicit), the live sha that never came up
// healthy (a crash after promote: converge it again), and the live sha with retry
// (tenancy's answer to a live release that turned unhealthy: run it again).
func (t *tick) shortcut(ctx context.Context, inst tenancy.Instruction) (bool, error) {
	st := t.st
	kind, f := shortcutOf(st, inst, t.a.now())
	switch kind {
	case shortcutLive:
		t.log.Debug("apply of the live release: nothing to do, reporting applied again")
		t.result = tenancy.ResultApplied
		return true, nil
	case shortcutFailed:
		if !f.Until.IsZero() {
			t.log.Warn("this sha failed on this box and is held until its next attempt; re-reporting the failure without a new lease. The box tries again by itself then",
				"code", f.Code, "next_attempt", f.Until)
		} else {
			t.log.Warn("this sha already failed on this box; re-reporting the failure without a new lease. Publish a fixed bundle or check in with retry to try again",
				"code", f.Code)
		}
		return true, &repeatedError{sha: inst.SHA, f: f}
	}
	if inst.Retry || inst.Rollback && st.Failed[inst.SHA].Code == codes.Rollback {
		delete(st.Failed, inst.SHA)
	}
	if kind != shortcutConverge {
		return false, nil
	}
	// The release is staged with its .env: converge it without a new lease.
	switch {
	case st.Confirmed:
		t.log.Warn("tenancy asks to apply the live release again (retry); running compose up on it again without a new lease")
	case st.Rebuilt != nil:
		t.log.Warn("the state was rebuilt (state.json did not parse), so the live release is not known to be healthy; running compose up on it again without a new lease",
			"rebuilt_at", st.Rebuilt.At)
	default:
		t.log.Warn("the live release never came up healthy (interrupted apply); running compose up again without a new lease")
	}
	rel, err := t.a.store.Read(ctx, inst.SHA, t.a.expect())
	if err != nil {
		return true, &Error{Op: "resume: read the live release", Err: err}
	}
	t.a.learnReleaseSecrets(inst.SHA, rel.Manifest)
	t.promoted = true
	return true, t.up(ctx, inst.SHA, rel.Manifest, rel.Services)
}

// shortcutKind is what an apply does before any download, decided by shortcutOf.
type shortcutKind int

const (
	// shortcutNone: the apply goes on (signature, download, verify, …).
	shortcutNone shortcutKind = iota
	// shortcutLive: the sha is live and confirmed, and tenancy asks for no retry:
	// report applied again.
	shortcutLive
	// shortcutFailed: the sha failed on this box before and tenancy asks for no
	// retry (nor for an explicit rollback of a ROLLBACK refusal): tell the failure
	// again, no lease.
	shortcutFailed
	// shortcutConverge: the sha is live but not confirmed (a crash after promote), or
	// tenancy asks for a retry of it: compose up on it again, no lease.
	shortcutConverge
)

// shortcutOf is the one place that decides whether an apply of inst needs a lease
// at all, for the tick and for plan; with shortcutFailed it returns the remembered
// failure. It changes nothing.
func shortcutOf(st *State, inst tenancy.Instruction, now time.Time) (shortcutKind, Failure) {
	if inst.SHA == st.LiveSHA && st.Confirmed && !inst.Retry {
		return shortcutLive, Failure{}
	}
	// A ROLLBACK refusal was about a missing rollback flag, not about the sha: an
	// explicit rollback verifies it again (a refusal costs no lease).
	explicitRollback := inst.Rollback && st.Failed[inst.SHA].Code == codes.Rollback
	if f, ok := st.Failed[inst.SHA]; ok && f.Holds(now) && !inst.Retry && !explicitRollback {
		return shortcutFailed, f
	}
	if inst.SHA == st.LiveSHA {
		return shortcutConverge, Failure{}
	}
	return shortcutNone, Failure{}
}

// download is the bundle streamed into releases/.<sha>.bundle; close removes it.
type download struct {
	*os.File
	remove func()
}

func (d download) close() {
	_ = d.Close() // read-only by now; removed next
	d.remove()
}

// download streams the bundle into a hidden file beside the releases (capped).
func (t *tick) download(ctx context.Context, sha string) (download, error) {
	f, remove, err := t.a.store.Download(sha)
	if err != nil {
		return download{}, &Error{Op: "download: create the bundle file", Err: err}
	}
	d := download{File: f, remove: remove}
	n, err := t.a.tenancy.Bundle(ctx, sha, f)
	if errors.Is(err, tenancy.ErrBundleTooLarge) {
		d.close()
		return download{}, t.refused(ctx, &bundle.RefusedError{SHA: sha, Refusals: []bundle.Refusal{{
			Code: codes.BundleMalformed, Detail: "the bundle download passed the size cap"}}})
	}
	if err != nil {
		d.close()
		return download{}, t.tenancyFailure("bundle download", err)
	}
	t.log.Info("downloaded the bundle; verifying it before asking for a lease", "bytes", n)
	return d, nil
}

// verify runs every check before the lease (bundle.Verify).
func (t *tick) verify(ctx context.Context, f *os.File, inst tenancy.Instruction) (*bundle.Result, error) {
	space, err := fsutil.SpaceOf(t.a.cfg.DeployDir)
	if err != nil {
		return nil, &Error{Op: "verify: free space under deploy_dir", Err: err}
	}
	if _, err := f.Seek(0, 0); err != nil {
		return nil, &Error{Op: "verify: rewind the bundle file", Err: err}
	}
	exp := t.a.expect()
	exp.EnvID, exp.SHA, exp.LiveSerial, exp.Rollback = t.a.cfg.EnvID, inst.SHA, t.st.LiveSerial, inst.Rollback
	exp.Disk = &bundle.Disk{FreeMB: space.FreeMB, MinFreeMB: t.a.cfg.MinFreeMB, BlockSize: space.BlockSize,
		FreeInodes: space.FreeInodes, TotalInodes: space.TotalInodes}
	res, err := bundle.Verify(ctx, f, exp)
	var refused *bundle.RefusedError
	switch {
	case errors.As(err, &refused):
		return nil, t.refused(ctx, refused)
	case err != nil:
		return nil, &Error{Op: "verify", Err: err}
	}
	t.log.Info("bundle verified", "files", res.Files, "bytes", res.Size, "services", strings.Join(res.Services, ","))
	return res, nil
}

// refused logs what a refusal means for the operator and returns it as the error of
// the step: its detail lists the refusals ("CODE: detail; …").
func (t *tick) refused(ctx context.Context, r *bundle.RefusedError) error {
	err := &Error{Op: "bundle refused", Code: r.Code(), Err: refusalList{r}}
	details := make([]string, 0, len(r.Refusals))
	for _, rf := range r.Refusals {
		details = append(details, string(rf.Code)+": "+rf.Detail)
	}
	if slices.Contains(codes.Signatures(), r.Code()) {
		t.log.Error("bundle refused for its signature (no lease taken, not remembered against the sha). Publish a signature of this env, sha and serial by a key in trusted_keys, or add the renderer's new key to trusted_keys; the next tick checks again",
			"code", r.Code(), "refusals", strings.Join(details, "; "))
		return err
	}
	if classify(r).rule.fault == faultBox {
		if note := t.freeableNote(ctx); note != "" {
			r.Refusals[0].Detail += "; " + note
			details[0] += "; " + note
		}
		t.log.Error("bundle refused before the lease: not enough free space under deploy_dir (no lease taken). Free space there; the next tick verifies the bundle again",
			"deploy_dir", t.a.cfg.DeployDir, "refusals", strings.Join(details, "; "))
		return err
	}
	t.log.Error("bundle refused before the lease (no lease taken, no OpenBao login). Fix the bundle in the renderer and publish again",
		"code", r.Code(), "refusals", strings.Join(details, "; "))
	return err
}

// baoReady asks OpenBao again before the lease when it was unreachable or sealed at
// the token upkeep, so that a login that cannot succeed costs no lease of the budget.
func (t *tick) baoReady(ctx context.Context) error {
	if !t.baoDown {
		return nil
	}
	tok, _ := t.a.readToken() // unreadable is the zero Value: nothing to ask with
	if tok.IsZero() {
		return nil // no token to ask with: the login after the lease says what is wrong
	}
	if _, err := t.a.bao.LookupSelf(ctx, tok); err != nil && IsTemporary(err) {
		t.log.Warn("OpenBao still unreachable or sealed; not asking for a lease, exiting 75, the next tick retries", "code", CodeOf(err), "err", err)
		return &Error{Op: "OpenBao before the lease", Err: err}
	}
	t.baoDown = false
	return nil
}

// boxReady checks before the lease what the box can know of itself, so that a fault
// of the box costs no lease of the budget: docker answers (at the endpoint compose
// uses: DOCKER_UNAVAILABLE when it cannot be reached, DOCKER_TIMEOUT when it does not
// answer within liveTimeout), and the state dir takes the token and the state the
// lease will write.
func (t *tick) boxReady(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	if _, err := t.a.readDockerVersion(dctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, compose.ErrDockerTimeout) {
			t.log.Warn("docker did not answer within its bound; not asking for a lease, exiting 75. The box is slow or dockerd hangs (systemctl status docker); the next tick tries again",
				"code", codes.DockerTimeout, "bound", liveTimeout, "err", err)
			return &Error{Op: "docker before the lease", Err: err}
		}
		t.log.Error("docker cannot be reached; not asking for a lease. Start docker (systemctl status docker); the next tick applies once it answers",
			"code", codes.DockerUnavailable, "err", err)
		return &Error{Op: "docker before the lease", Code: codes.DockerUnavailable, Err: err}
	}
	if err := fsutil.ProbeWrite(t.a.cfg.StateDir, stateRoom); err != nil {
		err = &Error{Op: "state dir before the lease", Err: err}
		t.log.Error("the state dir cannot take the token and the state; not asking for a lease. Free space there or fix its file system; the next tick tries again",
			"code", CodeOf(err), "state_dir", t.a.cfg.StateDir, "err", err)
		return err
	}
	return nil
}

// lease takes the deploy lease and logs into OpenBao with its grant; the new token
// replaces the stored one.
// leaseFor is the one rule of how an apply spends leases: one publish, one lease. A
// lease the box took for this sha at an earlier tick that did not end in a report (a
// temporary failure after the login, before or after the switch) goes on until its
// expires_at, with the token its login gave (bao.token): no new lease. Otherwise a new
// lease is taken and recorded in the state (docs/PROTOCOL.md, "One publish, one
// lease"). No grant is ever kept.
func (t *tick) leaseFor(ctx context.Context, sha string) (secret.Value, error) {
	if l := t.st.Lease; l != nil && l.SHA == sha && t.a.now().Before(l.ExpiresAt) {
		tok, err := t.a.readToken()
		if err == nil && !tok.IsZero() {
			t.log.Info("going on under the lease this box took for this sha at an earlier tick; no new lease",
				"leased_at", l.At, "expires", l.ExpiresAt)
			return tok, nil
		}
	}
	return t.lease(ctx, sha)
}

// lease takes a deploy lease for sha and logs into OpenBao with its grant; the new
// token replaces the stored one, and the lease is recorded (and saved at once, so
// that a crash before the switch does not cost a second lease).
func (t *tick) lease(ctx context.Context, sha string) (secret.Value, error) {
	id := t.leaseRequestID(sha)
	lease, err := t.a.tenancy.RequestLease(ctx, tenancy.LeaseRequest{EnvID: t.a.cfg.EnvID, SHA: sha, RequestID: id})
	if errors.Is(err, tenancy.ErrLeaseShape) {
		t.log.Error("tenancy answered a lease of AppRole or wrapped shape; there is no such path in this agent (MONKY-ADR-0028). Fix tenancy's lease issuer", "err", err)
		return secret.Value{}, &Error{Op: "lease", Err: err}
	}
	if err != nil {
		return secret.Value{}, t.tenancyFailure("lease", err)
	}
	t.out.Leased = true
	t.log.Info("deploy lease granted; logging into OpenBao with it", "expires", lease.ExpiresAt)
	info, err := t.login(ctx, lease.Grant, lease.ExpiresAt)
	if err != nil {
		return secret.Value{}, &Error{Op: "login with the lease's grant", Err: err}
	}
	if err := t.a.replaceToken(ctx, info); err != nil {
		return secret.Value{}, err
	}
	t.st.TokenExpires = info.ExpireTime
	t.st.Lease = &LeaseRecord{SHA: sha, At: t.a.now(), ExpiresAt: lease.ExpiresAt, RequestID: id}
	if err := t.a.saveState(t.st); err != nil {
		t.log.Warn("could not save the state after the lease; a crash before the switch would cost a second lease", "err", err)
	}
	return info.Token, nil
}

// leaseRequestID is the request id of the lease request for sha: the one of an
// earlier request for sha whose answer never came (the record's ExpiresAt is zero),
// or a new one, recorded and saved before the request is sent. Tenancy answers the
// same id with the same lease while it lasts, so a lost answer costs no second lease
// (docs/PROTOCOL.md, "One publish, one lease").
func (t *tick) leaseRequestID(sha string) string {
	if l := t.st.Lease; l != nil && l.SHA == sha && l.ExpiresAt.IsZero() && l.RequestID != "" {
		t.log.Info("asking again for the lease an earlier tick asked for and never heard back about, under the same request id",
			"asked_at", l.At)
		return l.RequestID
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := hex.EncodeToString(b[:])
	t.st.Lease = &LeaseRecord{SHA: sha, At: t.a.now(), RequestID: id}
	if err := t.a.saveState(t.st); err != nil {
		t.log.Warn("could not save the state before the lease request; if its answer is lost, the next tick asks under a new request id and may cost a second lease", "err", err)
	}
	return id
}

// loginAttempts is how many logins one lease's grant gets; the waits between them
// double from half a second.
const loginAttempts = 4

// login logs into OpenBao with a lease's grant. The grant lives in memory only (no
// grant on disk), so a lease whose login failed for a temporary reason would cost a
// second lease at the next tick: the same grant is tried again within the tick
// (loginAttempts), while the lease lasts.
func (t *tick) login(ctx context.Context, grant secret.Value, expires time.Time) (bao.TokenInfo, error) {
	wait := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		info, err := t.a.bao.Login(ctx, grant)
		if err == nil || !IsTemporary(err) || attempt == loginAttempts || !t.a.now().Add(wait).Before(expires) {
			return info, err
		}
		t.log.Warn("the login with the lease's grant failed for a temporary reason; trying the same grant again, no new lease",
			"attempt", attempt, "in", wait, "code", CodeOf(err), "err", err)
		select {
		case <-ctx.Done():
			return info, err
		case <-t.a.opts.After(wait):
		}
		wait *= 2
	}
}

// secretsReady reads, before the lease, the secrets the manifest names with the
// box's own token, so that a secret that does not exist costs no lease
// (docs/PROTOCOL.md, "Secrets before the lease"): missing is SECRET_MISSING (its sha
// held an hour, then tried again by itself), OpenBao unreachable is temporary. A
// denial is not final here: the lease's token decides, after the lease. The values
// read are registered with the redactor and dropped; the apply reads them again with
// the lease's token.
func (t *tick) secretsReady(ctx context.Context, m bundle.Manifest) error {
	tok, _ := t.a.readToken() // unreadable is the zero Value: the login after the lease says what is wrong
	if len(m.Secrets) == 0 || tok.IsZero() {
		return nil
	}
	_, err := t.a.bao.Read(ctx, tok, secretRefs(m))
	switch {
	case err == nil:
		t.log.Debug("the bundle's secrets exist and the box's token reads them; asking for a lease", "count", len(m.Secrets))
		return nil
	case errors.Is(err, bao.ErrSecretMissing):
		t.log.Error("a secret the bundle names does not exist in OpenBao; no lease taken. Write it (the err names the variable, path and key): the box tries again by itself within the hour",
			"code", CodeOf(err), "err", err)
		return &Error{Op: "secrets before the lease", Err: err}
	case IsTemporary(err):
		t.log.Warn("OpenBao unreachable or sealed before the lease; not asking for one, exiting 75, the next tick retries", "code", CodeOf(err), "err", err)
		return &Error{Op: "secrets before the lease", Err: err}
	default:
		t.log.Warn("the box's token cannot read the bundle's secrets; asking for a lease, whose token decides", "code", CodeOf(err), "err", err)
		return nil
	}
}

// secretRefs are the OpenBao references of the manifest's secrets, by variable.
func secretRefs(m bundle.Manifest) map[string]bao.Ref {
	refs := make(map[string]bao.Ref, len(m.Secrets))
	for name, r := range m.Secrets {
		refs[name] = bao.Ref{Path: r.Path, Key: r.Key}
	}
	return refs
}

// secrets reads the environment's secrets the manifest names (paths pinned to the env).
func (t *tick) secrets(ctx context.Context, token secret.Value, m bundle.Manifest) (map[string]secret.Value, error) {
	values, err := t.a.bao.Read(ctx, token, secretRefs(m))
	if err != nil {
		return nil, &Error{Op: "read secrets", Err: err}
	}
	t.log.Info("read the environment's secrets", "count", len(values))
	return values, nil
}

// stage renders the .env and stages the release (releases/.<sha>.tmp, renamed).
func (t *tick) stage(ctx context.Context, f *os.File, sha string, m bundle.Manifest, values map[string]secret.Value) error {
	env := maps.Clone(m.Vars)
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range values {
		env[k] = v.Reveal()
	}
	env["COMPOSE_PROJECT_NAME"] = t.a.cfg.Compose.Project
	data, err := bundle.RenderEnv(env)
	if err != nil {
		return &Error{Op: "render .env", Err: err}
	}
	if _, err := f.Seek(0, 0); err != nil {
		return &Error{Op: "stage: rewind the bundle file", Err: err}
	}
	labels := func(dir string) ([]byte, error) {
		return plan.Labels(ctx, plan.Source{SHA: sha, Files: dir, Dir: t.a.store.Dir(sha), Manifest: m, Project: t.a.cfg.Compose.Project})
	}
	if err := t.a.store.Stage(ctx, f, sha, data, labels); err != nil {
		return &Error{Op: "stage", Err: err}
	}
	return nil
}

// promote swaps current to the staged release; a failure from now on restores.
func (t *tick) promote(sha string, serial int64) error {
	live, err := t.a.store.Promote(serving(t.st), sha, serial, t.a.now())
	if err != nil {
		return &Error{Op: "promote", Err: err}
	}
	setServing(t.st, live)
	t.promoted = true
	if err := t.a.saveState(t.st); err != nil {
		t.log.Warn("could not save the state after promote; the next tick repairs it from the current symlink", "err", err)
	}
	t.log.Info("promoted the release; running docker compose up", "release", t.a.store.Dir(sha))
	return nil
}

// up runs compose up on the live release and waits for health; then the release is
// confirmed, older ones are pruned and applied is reported.
func (t *tick) up(ctx context.Context, sha string, m bundle.Manifest, services []string) error {
	cc, err := t.a.composeFor(sha, m.ComposeFiles)
	if err != nil {
		return &Error{Op: "compose", Err: err}
	}
	t.st.LiveServices = slices.Clone(services)
	upOut, err := cc.Up(ctx)
	t.tail = upOut.String()
	if err != nil {
		return &Error{Op: "compose up", Err: err}
	}
	// Recorded before the health wait, so that the images of a release that fails
	// are removed too once it is pruned.
	t.recordImages(ctx, sha)
	states, err := cc.WaitHealthy(ctx, t.a.waitOptions(services))
	if err != nil {
		var he *compose.Error
		if errors.As(err, &he) && len(he.Services) > 0 && ctx.Err() == nil {
			// Per failing service: its last healthchecks and exit code, then its logs,
			// read before a restore recreates the containers.
			evidence := cc.HealthEvidence(ctx, he.Services)
			t.tail += "\n" + evidence
			t.evidence = keepEnd(t.a.red.Redact(evidence), maxEvidence)
			t.log.Error("the release failed its health check; the failing services' last healthchecks and log lines are kept with the failure (`monky-deployd status` shows them)",
				"code", CodeOf(err), "services", strings.Join(he.Services, ","), "evidence", t.evidence)
		}
		return &Error{Op: "health", Err: err}
	}
	if err := t.hooksAfter(ctx, sha, m); err != nil {
		return err
	}
	confirmLive(t.st, states)
	t.st.LastRestore = nil
	delete(t.st.Failed, sha)
	t.log.Info("applied: every service is running and healthy", "services", len(states))
	t.a.store.Prune(serving(t.st), t.a.cfg.Compose.KeepReleases)
	if r := t.reclaimImages(ctx); r != nil {
		t.note = r.String()
		if r.Images > 0 {
			t.st.LastReclaim = r
		}
	}
	t.endRebuilt()
	t.result, t.services = tenancy.ResultApplied, toServiceStates(states)
	return nil
}

// endRebuilt ends the note of a rebuilt state at a successful apply of a later run:
// the run that rebuilt it (and converged the live release) keeps it, so that status
// tells it.
func (t *tick) endRebuilt() {
	if r := t.st.Rebuilt; r != nil && r.At.Before(t.started) {
		t.st.Rebuilt = nil
	}
}
