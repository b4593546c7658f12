package deployd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/compose-spec/compose-go/v2/dotenv"

	"github.com/monky/monky-deployd/deployd/bao"
	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/composecheck"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// maxTail bounds the report's tail.
const maxTail = 8 << 10

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

// boundTail keeps the end of a tail (where compose says what went wrong) within
// maxTail bytes, cut at a rune boundary.
func boundTail(s string) string {
	if len(s) <= maxTail {
		return s
	}
	i := len(s) - maxTail
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// dockerVersionTTL is how long the docker version sent in the check-in is cached, so
// that the idle tick runs no subprocess.
const dockerVersionTTL = time.Hour

// apply converges the box to the instruction's sha.
func (a *Agent) apply(ctx context.Context, st *State, inst tenancy.Instruction, out Outcome) (Outcome, error) {
	started := a.now()
	out.SHA, out.Serial = inst.SHA, inst.Serial
	log := a.log.With("sha", short(inst.SHA), "serial", inst.Serial)

	if inst.SHA == st.LiveSHA && st.Confirmed {
		log.Debug("apply of the live release: nothing to do, reporting applied again")
		return a.finish(ctx, st, out, tenancy.ResultApplied, nil, nil, started)
	}
	// A ROLLBACK refusal was about a missing rollback flag, not about the sha: an
	// explicit rollback verifies it again (a refusal costs no lease).
	explicitRollback := inst.Rollback && st.Failed[inst.SHA].Code == string(bundle.CodeRollback)
	if f, ok := st.Failed[inst.SHA]; ok && !inst.Retry && !explicitRollback {
		log.Warn("this sha already failed on this box; re-reporting the failure without a new lease. Publish a fixed bundle or check in with retry to try again",
			"code", f.Code)
		err := &Error{Op: "apply", Code: f.Code, Err: fmt.Errorf("sha %s failed before on this box (%s): %s", short(inst.SHA), f.Code, f.Detail)}
		return a.finish(ctx, st, out, tenancy.ResultFailed, err, nil, started)
	}
	if inst.Retry || explicitRollback {
		delete(st.Failed, inst.SHA)
	}
	if inst.SHA == st.LiveSHA && !st.Confirmed {
		// A crash after promote: the release is staged with its .env; converge it
		// without a new lease.
		log.Warn("the live release never came up healthy (interrupted apply); running compose up again without a new lease")
		m, err := readManifest(filepath.Join(a.cfg.ReleasesDir(), inst.SHA))
		if err != nil {
			return a.fail(ctx, st, out, &Error{Op: "resume", Code: CodeApplyFailed, Err: err}, "", started)
		}
		a.learnReleaseSecrets(inst.SHA, m)
		return a.up(ctx, st, out, inst.SHA, m, nil, started)
	}

	if err := mkdirMode(a.cfg.ReleasesDir(), 0o755); err != nil {
		return out, &Error{Op: "releases directory", Code: CodeStateUnavailable, Err: err}
	}
	// Download into a hidden file beside the releases: streamed, capped, removed after.
	dl := filepath.Join(a.cfg.ReleasesDir(), "."+inst.SHA+".bundle")
	f, err := os.OpenFile(dl, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return out, &Error{Op: "download", Code: CodeStateUnavailable, Err: err}
	}
	defer func() {
		// A leftover download is also removed by the next tick's repair.
		_ = f.Close()
		if err := os.Remove(dl); err != nil {
			a.log.Warn("could not remove the downloaded bundle; the next tick removes it", "path", dl, "err", err)
		}
	}()
	n, err := a.tenancy.Bundle(ctx, inst.SHA, f)
	if err != nil {
		if errors.Is(err, tenancy.ErrBundleTooLarge) {
			return a.refuse(ctx, st, out, &bundle.RefusedError{SHA: inst.SHA, Refusals: []bundle.Refusal{{
				Code: bundle.CodeBundleMalformed, Detail: "the bundle download passed the size cap"}}}, started)
		}
		return out, a.tenancyFailure(st, "bundle download", err)
	}
	log.Info("downloaded the bundle; verifying it before asking for a lease", "bytes", n)

	// Every check before the lease.
	free, ferr := fsutil.FreeMB(a.cfg.DeployDir)
	if ferr != nil {
		return out, &Error{Op: "free space", Code: CodeStateUnavailable, Err: ferr}
	}
	if _, err := f.Seek(0, 0); err != nil {
		return out, &Error{Op: "verify", Code: CodeStateUnavailable, Err: err}
	}
	res, err := bundle.Verify(ctx, f, bundle.Expect{
		EnvID:           a.cfg.EnvID,
		SHA:             inst.SHA,
		LiveSerial:      st.LiveSerial,
		Rollback:        inst.Rollback,
		Disk:            &bundle.Disk{FreeMB: free, MinFreeMB: a.cfg.MinFreeMB},
		AllowPrivileged: a.cfg.Compose.AllowPrivileged,
		ProjectName:     a.cfg.Compose.Project,
	})
	var refused *bundle.RefusedError
	if errors.As(err, &refused) {
		return a.refuse(ctx, st, out, refused, started)
	}
	if err != nil {
		if stopped := a.stopped(ctx, out, err); stopped != nil {
			return out, stopped
		}
		return out, &Error{Op: "verify", Code: CodeStateUnavailable, Err: err}
	}
	log.Info("bundle verified", "files", res.Files, "bytes", res.Size, "services", strings.Join(res.Services, ","))

	// OpenBao was unreachable or sealed at the token upkeep: ask again before the
	// lease, so that a login that cannot succeed costs no lease of the budget.
	if a.baoDown {
		if err := a.baoReachable(ctx); err != nil {
			log.Warn("OpenBao still unreachable or sealed; not asking for a lease, exiting 75, the next tick retries", "err", err)
			return out, &Error{Op: "OpenBao before the lease", Code: CodeUnavailable, Err: err}
		}
	}

	// Lease → login → secrets.
	lease, err := a.tenancy.Lease(ctx, a.cfg.EnvID, inst.SHA)
	if err != nil {
		if errors.Is(err, tenancy.ErrLeaseShape) {
			log.Error("tenancy answered a lease of AppRole or wrapped shape; there is no such path in this agent (MONKY-ADR-0028). Fix tenancy's lease issuer", "err", err)
			return a.fail(ctx, st, out, &Error{Op: "lease", Code: "LEASE_SHAPE", Err: err}, "", started)
		}
		return out, a.tenancyFailure(st, "lease", err)
	}
	out.Leased = true
	log.Info("deploy lease granted; logging into OpenBao with it", "expires", lease.ExpiresAt)
	info, err := a.bao.Login(ctx, lease.Grant)
	if err != nil {
		if bao.IsTemporary(err) {
			log.Warn("OpenBao unreachable or sealed at login; exiting 75, the next tick retries", "err", err)
			return out, &Error{Op: "login", Code: CodeUnavailable, Err: err}
		}
		// Reported failed, but not remembered: a refused login (most often a grant
		// superseded by a newer lease, a race) says nothing of the bundle. The next
		// tick leases again; the lease budget bounds how often.
		return a.failWith(ctx, st, out, &Error{Op: "login", Code: CodeOf(err), Err: err}, "", started, false)
	}
	if err := a.replaceToken(ctx, info); err != nil {
		return out, err
	}
	st.TokenExpires = info.ExpireTime
	refs := make(map[string]bao.Ref, len(res.Manifest.Secrets))
	for name, r := range res.Manifest.Secrets {
		refs[name] = bao.Ref{Path: r.Path, Key: r.Key}
	}
	values, err := a.bao.Read(ctx, info.Token, refs)
	if err != nil {
		if bao.IsTemporary(err) {
			log.Warn("OpenBao unreachable or sealed while reading secrets; exiting 75, the next tick retries", "err", err)
			return out, &Error{Op: "read secrets", Code: CodeUnavailable, Err: err}
		}
		return a.fail(ctx, st, out, &Error{Op: "read secrets", Code: CodeOf(err), Err: err}, "", started)
	}
	log.Info("read the environment's secrets", "count", len(values))

	// Stage releases/.<sha>.tmp, then rename to releases/<sha>.
	if err := a.stage(ctx, f, inst.SHA, res.Manifest, values); err != nil {
		return a.fail(ctx, st, out, err, "", started)
	}
	// Promote: `current` swapped atomically.
	prev := st.LiveSHA
	if err := fsutil.SwapSymlink(filepath.Join("releases", inst.SHA), a.cfg.CurrentLink()); err != nil {
		return a.fail(ctx, st, out, &Error{Op: "promote", Code: CodeApplyFailed, Err: err}, "", started)
	}
	now := a.now()
	_ = os.Chtimes(filepath.Join(a.cfg.ReleasesDir(), inst.SHA), now, now)
	st.PreviousSHA = prev // what the box served: "" when nothing (after a down)
	st.LiveSHA, st.LiveSerial, st.Confirmed = inst.SHA, res.Manifest.Serial, false
	if err := a.saveState(st); err != nil {
		log.Warn("could not save the state after promote; the next tick repairs it from the current symlink", "err", err)
	}
	log.Info("promoted the release; running docker compose up", "release", filepath.Join(a.cfg.ReleasesDir(), inst.SHA))
	return a.up(ctx, st, out, inst.SHA, res.Manifest, res.Services, started)
}

// baoReachable asks OpenBao again (lookup-self with the stored token) and returns
// its error when OpenBao is still unreachable or sealed; any other answer means a
// login can be tried.
func (a *Agent) baoReachable(ctx context.Context) error {
	tok, _ := a.readToken() // unreadable is the zero Value: nothing to ask with
	if tok.IsZero() {
		return nil // no token to ask with: the login after the lease says what is wrong
	}
	if _, err := a.bao.LookupSelf(ctx, tok); err != nil && bao.IsTemporary(err) {
		return err
	}
	a.baoDown = false
	return nil
}

// up runs compose up on the live release and waits for health; on failure it
// restores the previous release. services are the bundle's services as Verify found
// them; nil (a resumed apply) reads them from the release's compose files.
func (a *Agent) up(ctx context.Context, st *State, out Outcome, sha string, m bundle.Manifest, services []string, started time.Time) (Outcome, error) {
	cc, err := a.composeFor(sha, m.ComposeFiles)
	if err != nil {
		return a.failAfterPromote(ctx, st, out, &Error{Op: "compose", Code: CodeApplyFailed, Err: err}, "", started)
	}
	upOut, err := cc.Up(ctx)
	if err != nil {
		return a.failAfterPromote(ctx, st, out, &Error{Op: "apply", Code: CodeApplyFailed, Err: err}, upOut.String(), started)
	}
	if services == nil {
		if services, err = a.services(ctx, sha, m); err != nil {
			return a.failAfterPromote(ctx, st, out, &Error{Op: "compose services", Code: CodeApplyFailed, Err: err}, upOut.String(), started)
		}
	}
	states, err := cc.WaitHealthy(ctx, compose.WaitOptions{Services: services, Timeout: time.Duration(a.cfg.Compose.HealthTimeout), Poll: a.opts.HealthPoll})
	if err != nil {
		tail := upOut.String()
		var he *compose.Error
		if errors.As(err, &he) && len(he.Services) > 0 && ctx.Err() == nil {
			// Per failing service: its last healthchecks and exit code, then its logs.
			tail += "\n" + cc.HealthEvidence(ctx, he.Services)
		}
		return a.failAfterPromote(ctx, st, out, &Error{Op: "health", Code: CodeOf(err), Err: err}, tail, started)
	}
	st.Confirmed = true
	st.LastRestore = nil
	delete(st.Failed, sha)
	a.log.Info("applied: every service is running and healthy", "sha", short(sha), "serial", m.Serial, "services", len(states))
	a.prune(sha, st.PreviousSHA)
	return a.finish(ctx, st, out, tenancy.ResultApplied, nil, toServiceStates(states), started)
}

// failAfterPromote restores the previous release (or, when there is none, takes the
// failed one down), waits for the restored release to be healthy, then reports the
// failure; the report's detail ends with what became of the box (docs/OPERATIONS.md,
// "After a failed apply").
func (a *Agent) failAfterPromote(ctx context.Context, st *State, out Outcome, cause error, tail string, started time.Time) (Outcome, error) {
	if stopped := a.stopped(ctx, out, cause); stopped != nil {
		return out, stopped
	}
	failed := st.LiveSHA
	prev := st.PreviousSHA
	var r Restore
	if _, err := os.Stat(filepath.Join(a.cfg.ReleasesDir(), prev)); prev != "" && prev != failed && err == nil {
		a.log.Warn("apply failed after promote; restoring the previous release", "failed_sha", short(failed), "restore_sha", short(prev), "err", cause)
		r = a.restore(ctx, st, prev)
	} else {
		r = a.takeDown(ctx, st, failed, cause)
	}
	if stopped := a.stopped(ctx, out, cause); stopped != nil {
		return out, stopped
	}
	r.At = a.now()
	st.LastRestore = &r
	out.Restore = r.Result
	return a.fail(ctx, st, out, &restoredError{cause: cause, r: r}, tail, started)
}

// restore points current back at prev, runs compose up on it and waits until it is
// healthy, bounded by health_timeout.
func (a *Agent) restore(ctx context.Context, st *State, prev string) Restore {
	r := Restore{SHA: prev, Result: RestoreFailed}
	if err := fsutil.SwapSymlink(filepath.Join("releases", prev), a.cfg.CurrentLink()); err != nil {
		a.log.Error("could not point current back at the previous release; fix the symlink by hand, then run `docker compose up -d` in it",
			"link", a.cfg.CurrentLink(), "restore_sha", short(prev), "err", err)
		r.Detail = "current could not be pointed back at it"
		return r
	}
	st.LiveSHA, st.LiveSerial, st.PreviousSHA, st.Confirmed = prev, a.releaseSerial(prev), "", false
	m, err := readManifest(filepath.Join(a.cfg.ReleasesDir(), prev))
	if err != nil {
		a.log.Error("the restored release has no readable manifest; the box may be degraded", "restore_sha", short(prev), "err", err)
		r.Detail = "its manifest could not be read"
		return r
	}
	a.learnReleaseSecrets(prev, m)
	cc, err := a.composeFor(prev, m.ComposeFiles)
	if err == nil {
		_, err = cc.Up(ctx)
	}
	if err != nil {
		a.log.Error("compose up of the restored release failed; the box may be degraded. Look with `docker compose ps --all` in the current directory",
			"restore_sha", short(prev), "err", err)
		r.Detail = "compose up failed"
		return r
	}
	services, err := a.services(ctx, prev, m)
	if err == nil {
		_, err = cc.WaitHealthy(ctx, compose.WaitOptions{Services: services, Timeout: time.Duration(a.cfg.Compose.HealthTimeout), Poll: a.opts.HealthPoll})
	}
	if err != nil {
		a.log.Error("restored the previous release, but it is not healthy either; the box is degraded. Look with `docker compose ps --all` and `docker compose logs` in the current directory",
			"restore_sha", short(prev), "err", err)
		r.Result, r.Detail = RestoreUnhealthy, a.red.Redact(err.Error())
		return r
	}
	st.Confirmed = true
	a.log.Info("restored the previous release and it is healthy: the box serves what it served before the failed apply", "sha", short(prev))
	r.Result = RestoreHealthy
	return r
}

// takeDown takes a failed release down when nothing served before it: the box then
// serves what it served before, which was nothing.
func (a *Agent) takeDown(ctx context.Context, st *State, failed string, cause error) Restore {
	a.log.Warn("apply failed after promote and there is no previous release; taking the failed release down", "failed_sha", short(failed), "err", cause)
	if m, err := readManifest(filepath.Join(a.cfg.ReleasesDir(), failed)); err == nil {
		if cc, cerr := a.composeFor(failed, m.ComposeFiles); cerr == nil {
			if _, derr := cc.Down(ctx, false); derr != nil {
				a.log.Error("compose down of the failed release failed", "err", derr)
			}
		}
	}
	if err := os.Remove(a.cfg.CurrentLink()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.log.Error("could not remove the current symlink", "link", a.cfg.CurrentLink(), "err", err)
	}
	_ = fsutil.SyncDir(a.cfg.DeployDir)
	st.LiveSHA, st.LiveSerial, st.Confirmed = "", 0, false
	return Restore{Result: RestoreNone}
}

// restoredError is a failure after promote with what became of the box: its text
// ends with the restore's outcome, so that the report's detail says it.
type restoredError struct {
	cause error
	r     Restore
}

func (e *restoredError) Error() string { return e.cause.Error() + "; " + e.r.String() }

func (e *restoredError) Unwrap() error { return e.cause }

// refuse reports a refused bundle: no lease was taken.
func (a *Agent) refuse(ctx context.Context, st *State, out Outcome, r *bundle.RefusedError, started time.Time) (Outcome, error) {
	details := make([]string, 0, len(r.Refusals))
	for _, rf := range r.Refusals {
		details = append(details, string(rf.Code)+": "+rf.Detail)
	}
	cause := &Error{Op: "bundle refused", Code: r.Code(), Err: refusalList{r}}
	if onlyDiskLow(r) {
		// Not a fault of the bundle: once the operator frees space, the next tick
		// verifies it again (a refusal costs no lease), without waiting for a retry.
		a.log.Error("bundle refused before the lease: not enough free space under deploy_dir (no lease taken). Free space there; the next tick verifies the bundle again",
			"sha", short(out.SHA), "deploy_dir", a.cfg.DeployDir, "refusals", strings.Join(details, "; "))
		return a.failWith(ctx, st, out, cause, "", started, false)
	}
	a.log.Error("bundle refused before the lease (no lease taken, no OpenBao login). Fix the bundle in the renderer and publish again",
		"sha", short(out.SHA), "code", r.Code(), "refusals", strings.Join(details, "; "))
	return a.fail(ctx, st, out, cause, "", started)
}

// onlyDiskLow reports whether every refusal of r is DISK_LOW: a refusal of the box,
// not of the bundle.
func onlyDiskLow(r *bundle.RefusedError) bool {
	for _, rf := range r.Refusals {
		if rf.Code != bundle.CodeDiskLow {
			return false
		}
	}
	return len(r.Refusals) > 0
}

// refusalList prints a refusal as its refusals, "CODE: detail; CODE: detail", for the
// report's detail; errors.As still finds the RefusedError.
type refusalList struct{ r *bundle.RefusedError }

func (l refusalList) Error() string {
	parts := make([]string, 0, len(l.r.Refusals))
	for _, rf := range l.r.Refusals {
		parts = append(parts, rf.String())
	}
	return strings.Join(parts, "; ")
}

func (l refusalList) Unwrap() error { return l.r }

// stopped returns a temporary error when ctx was cancelled (a signal, or the caller
// giving up): a stop is treated like a crash, not like a failure of the sha. Nothing
// is restored, remembered as failed or reported; the release stays where it is, and
// the next tick resumes (a promoted release converges without a new lease).
func (a *Agent) stopped(ctx context.Context, out Outcome, cause error) error {
	if ctx.Err() == nil {
		return nil
	}
	a.log.Warn("the tick was stopped mid-way; leaving the release where it is, the next tick resumes",
		"sha", short(out.SHA), "err", cause)
	return &Error{Op: "tick stopped", Code: CodeInterrupted, Err: errors.Join(ctx.Err(), cause)}
}

// fail records a failed sha and reports it.
func (a *Agent) fail(ctx context.Context, st *State, out Outcome, cause error, tail string, started time.Time) (Outcome, error) {
	return a.failWith(ctx, st, out, cause, tail, started, true)
}

// failWith reports a failure; remember records the sha as failed, so that it costs no
// new lease until tenancy asks with retry.
func (a *Agent) failWith(ctx context.Context, st *State, out Outcome, cause error, tail string, started time.Time, remember bool) (Outcome, error) {
	if stopped := a.stopped(ctx, out, cause); stopped != nil {
		return out, stopped
	}
	if remember {
		code := CodeOf(cause)
		detail := boundDetail(a.red.Redact(cause.Error()))
		st.rememberFailure(out.SHA, Failure{Serial: out.Serial, Code: code, Detail: detail, At: a.now()})
	}
	return a.finishTail(ctx, st, out, tenancy.ResultFailed, cause, nil, tail, started)
}

func (a *Agent) finish(ctx context.Context, st *State, out Outcome, result tenancy.Result, cause error, services []tenancy.ServiceState, started time.Time) (Outcome, error) {
	return a.finishTail(ctx, st, out, result, cause, services, "", started)
}

// finishTail sends the report and records the outcome. A report that cannot be sent
// is logged; the next check-in carries the result again.
func (a *Agent) finishTail(ctx context.Context, st *State, out Outcome, result tenancy.Result, cause error, services []tenancy.ServiceState, tail string, started time.Time) (Outcome, error) {
	out.Result = string(result)
	out.Code = CodeOf(cause)
	if cause != nil {
		out.Detail = boundDetail(a.red.Redact(cause.Error()))
	}
	st.LastResult, st.LastCode, st.LastDetail, st.LastSHA = out.Result, out.Code, out.Detail, out.SHA
	tail = boundTail(a.red.Redact(tail))
	rep := tenancy.Report{
		EnvID:    a.cfg.EnvID,
		SHA:      out.SHA,
		Serial:   out.Serial,
		Result:   result,
		Code:     out.Code,
		Detail:   out.Detail,
		Tail:     tail,
		Services: services,
		Duration: a.now().Sub(started),
	}
	if err := a.tenancy.Report(ctx, rep); err != nil {
		if errors.Is(err, tenancy.ErrEnvMismatch) {
			// As at the check-in: latch, and exit 78 whatever the tick's outcome.
			return out, a.tenancyFailure(st, "report", err)
		}
		a.log.Warn("could not send the report; the next check-in carries the last result", "result", result, "code", out.Code, "err", err)
		if cause == nil && tenancy.IsTemporary(err) {
			cause = &Error{Op: "report", Code: CodeUnavailable, Err: err}
		}
	}
	return out, cause
}

// stage extracts the bundle into releases/.<sha>.tmp, writes the .env (0600) and
// renames the directory to releases/<sha>.
func (a *Agent) stage(ctx context.Context, f *os.File, sha string, m bundle.Manifest, values map[string]secret.Value) error {
	tmp := filepath.Join(a.cfg.ReleasesDir(), "."+sha+".tmp")
	final := filepath.Join(a.cfg.ReleasesDir(), sha)
	_ = os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return &Error{Op: "stage", Code: CodeApplyFailed, Err: err}
	}
	// The final mode whatever the umask: container users read the release.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return &Error{Op: "stage", Code: CodeApplyFailed, Err: err}
	}
	if _, err := f.Seek(0, 0); err != nil {
		return &Error{Op: "stage", Code: CodeApplyFailed, Err: err}
	}
	if err := bundle.Extract(ctx, f, tmp, sha, bundle.Limits{}); err != nil {
		_ = os.RemoveAll(tmp)
		return &Error{Op: "stage", Code: CodeOf(err), Err: err}
	}
	env := make(map[string]string, len(m.Vars)+len(values)+1)
	for k, v := range m.Vars {
		env[k] = v
	}
	for k, v := range values {
		env[k] = v.Reveal()
	}
	env["COMPOSE_PROJECT_NAME"] = a.cfg.Compose.Project
	data, err := bundle.RenderEnv(env)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return &Error{Op: "render .env", Code: CodeApplyFailed, Err: err}
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(tmp, ".env"), data, 0o600); err != nil {
		_ = os.RemoveAll(tmp)
		return &Error{Op: "write .env", Code: CodeApplyFailed, Err: err}
	}
	if err := fsutil.SyncDir(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return &Error{Op: "stage", Code: CodeApplyFailed, Err: err}
	}
	// A release of the same sha (a retry, or a rollback to a kept release) is
	// replaced whole: its .env may hold older secrets.
	old := filepath.Join(a.cfg.ReleasesDir(), "."+sha+".old")
	moved := false
	if _, err := os.Stat(final); err == nil {
		if err := os.Rename(final, old); err != nil {
			_ = os.RemoveAll(tmp)
			return &Error{Op: "stage", Code: CodeApplyFailed, Err: err}
		}
		moved = true
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.RemoveAll(tmp)
		if moved {
			// Put the kept release back: it may be the one a restore needs.
			if rerr := os.Rename(old, final); rerr != nil {
				a.log.Error("could not put a kept release back after a failed restage; the next tick's repair moves it back", "path", old, "err", rerr)
			}
		}
		return &Error{Op: "stage", Code: CodeApplyFailed, Err: err}
	}
	if moved {
		if err := os.RemoveAll(old); err != nil {
			a.log.Warn("could not remove the replaced copy of a release; the next tick removes it", "path", old, "err", err)
		}
	}
	if err := fsutil.SyncDir(a.cfg.ReleasesDir()); err != nil {
		return &Error{Op: "stage", Code: CodeApplyFailed, Err: err}
	}
	return nil
}

// down takes the live release down: compose down (with volumes only when tenancy asks
// for a purge and the tier is not prod), current removed, report down.
func (a *Agent) down(ctx context.Context, st *State, inst tenancy.Instruction, out Outcome) (Outcome, error) {
	started := a.now()
	out.SHA, out.Serial = st.LiveSHA, st.LiveSerial
	purge := inst.Purge
	if purge && a.cfg.Tier() == "prod" {
		a.log.Warn("tenancy asked for a purge on a prod environment; prod never purges, taking it down without -v")
		purge = false
	}
	if sha := st.LiveSHA; sha != "" {
		m, err := readManifest(filepath.Join(a.cfg.ReleasesDir(), sha))
		if err != nil {
			return a.finish(ctx, st, out, tenancy.ResultFailed, &Error{Op: "down", Code: CodeApplyFailed, Err: err}, nil, started)
		}
		a.learnReleaseSecrets(sha, m)
		cc, err := a.composeFor(sha, m.ComposeFiles)
		if err == nil {
			var dout compose.Output
			dout, err = cc.Down(ctx, purge)
			if err != nil {
				return a.finishTail(ctx, st, out, tenancy.ResultFailed, &Error{Op: "compose down", Code: CodeApplyFailed, Err: err}, nil, dout.String(), started)
			}
		}
		if err != nil {
			return a.finish(ctx, st, out, tenancy.ResultFailed, &Error{Op: "compose down", Code: CodeApplyFailed, Err: err}, nil, started)
		}
		a.log.Info("took the environment down", "sha", short(sha), "volumes_removed", purge)
	}
	if err := os.Remove(a.cfg.CurrentLink()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return a.finish(ctx, st, out, tenancy.ResultFailed, &Error{Op: "down", Code: CodeApplyFailed, Err: err}, nil, started)
	}
	_ = fsutil.SyncDir(existingParent(a.cfg.DeployDir))
	if st.LiveSHA != "" {
		st.PreviousSHA = st.LiveSHA
	}
	st.LiveSHA, st.LiveSerial, st.Confirmed = "", 0, false
	return a.finish(ctx, st, out, tenancy.ResultDown, nil, nil, started)
}

// composeFor returns a compose client for the release of sha. The project directory
// is the release's real path, not `current`: a changed bind-mounted file then has a
// new source path, so compose recreates exactly the containers that use it.
func (a *Agent) composeFor(sha string, files []string) (*compose.Client, error) {
	return compose.New(compose.Config{
		Docker:  a.cfg.Compose.Docker,
		Project: a.cfg.Compose.Project,
		Dir:     filepath.Join(a.cfg.ReleasesDir(), sha),
		Files:   files,
		Env:     a.opts.DockerEnv,
		Logger:  a.log,
	})
}

// services lists the compose services of a staged release, from its compose files.
func (a *Agent) services(ctx context.Context, sha string, m bundle.Manifest) ([]string, error) {
	dir := filepath.Join(a.cfg.ReleasesDir(), sha)
	in := composecheck.Input{
		Files:           map[string][]byte{},
		ComposeFiles:    m.ComposeFiles,
		BundleFiles:     m.Files,
		Vars:            m.Vars,
		AllowPrivileged: a.cfg.Compose.AllowPrivileged,
		ProjectName:     a.cfg.Compose.Project,
	}
	for name := range m.Secrets {
		in.SecretNames = append(in.SecretNames, name)
	}
	for _, f := range m.ComposeFiles {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("read compose file %s of the release: %w", f, err)
		}
		in.Files[f] = data
	}
	res := composecheck.Check(ctx, in)
	if len(res.Services) == 0 {
		return nil, fmt.Errorf("the release's compose files define no service")
	}
	return res.Services, nil
}

// dockerVersion is the docker server version for the check-in. It is kept in the
// state for an hour, so that the idle tick (one process per timer run) runs no
// subprocess.
func (a *Agent) dockerVersion(ctx context.Context, st *State) string {
	now := a.now()
	if !st.DockerVersionAt.IsZero() && now.Sub(st.DockerVersionAt) < dockerVersionTTL && now.After(st.DockerVersionAt) {
		return st.DockerVersion
	}
	cc, err := compose.New(compose.Config{Docker: a.cfg.Compose.Docker, Project: a.cfg.Compose.Project, Dir: existingParent(a.cfg.DeployDir), Env: a.opts.DockerEnv, Logger: a.log})
	if err != nil {
		return ""
	}
	v, err := cc.DockerVersion(ctx)
	if err != nil {
		a.log.Debug("could not read the docker version; the check-in sends none", "err", err)
	}
	st.DockerVersion, st.DockerVersionAt = v, now
	return v
}

// prune keeps the newest keep_releases releases (live and previous always kept).
func (a *Agent) prune(live, prev string) {
	entries, err := os.ReadDir(a.cfg.ReleasesDir())
	if err != nil {
		return
	}
	type rel struct {
		name string
		mod  time.Time
	}
	var rels []rel
	for _, e := range entries {
		if !e.IsDir() || !isSHA(e.Name()) || e.Name() == live || e.Name() == prev {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		rels = append(rels, rel{e.Name(), info.ModTime()})
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].mod.After(rels[j].mod) })
	keep := a.cfg.Compose.KeepReleases - 1
	if prev != "" {
		keep--
	}
	if keep < 0 {
		keep = 0
	}
	for i, r := range rels {
		if i < keep {
			continue
		}
		p := filepath.Join(a.cfg.ReleasesDir(), r.name)
		if err := os.RemoveAll(p); err != nil {
			a.log.Warn("could not prune an old release", "path", p, "err", err)
			continue
		}
		a.log.Info("pruned an old release", "sha", short(r.name))
	}
}

// learnReleaseSecrets registers the secret values in the .env of a staged release with
// the redactor. A tick that resumes, restores or takes down a release read none of
// them from OpenBao, yet compose's output and the containers' logs may print them.
func (a *Agent) learnReleaseSecrets(sha string, m bundle.Manifest) {
	if len(m.Secrets) == 0 {
		return
	}
	p := filepath.Join(a.cfg.ReleasesDir(), sha, ".env")
	f, err := os.Open(p)
	if err != nil {
		a.log.Warn("could not read the release's .env to redact its secrets from compose's output", "path", p, "err", err)
		return
	}
	defer func() { _ = f.Close() }() // read-only
	env, err := dotenv.Parse(f)
	if err != nil {
		// The parser's message may quote the line, a secret value: not logged.
		a.log.Warn("could not parse the release's .env to redact its secrets from compose's output", "path", p)
		return
	}
	for name := range m.Secrets {
		a.red.Add(env[name])
	}
}

// releaseSerial reads the serial from a release's manifest.json; 0 when unreadable.
func (a *Agent) releaseSerial(sha string) int64 {
	m, err := readManifest(filepath.Join(a.cfg.ReleasesDir(), sha))
	if err != nil {
		return 0
	}
	return m.Serial
}

// mkdirMode creates dir (and its parents) and gives dir itself mode perm, whatever the
// process umask.
func mkdirMode(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	return os.Chmod(dir, perm)
}

func readManifest(dir string) (bundle.Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return bundle.Manifest{}, fmt.Errorf("read the release's manifest: %w", err)
	}
	var m bundle.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return bundle.Manifest{}, fmt.Errorf("decode the release's manifest: %w", err)
	}
	return m, nil
}

func toServiceStates(in []compose.ServiceState) []tenancy.ServiceState {
	out := make([]tenancy.ServiceState, 0, len(in))
	for _, s := range in {
		out = append(out, tenancy.ServiceState{Name: s.Name, State: s.State, Health: s.Health})
	}
	return out
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
