package deployd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// This file is the one place that decides what a failure means (docs/OPERATIONS.md,
// "What each code means"): the table rules, and classify, its only reader. Steps
// return their cause with what they were doing (*Error); they never decide whether
// it is temporary, reported, remembered or restored.

// fault is whose fault a failure is; the rest of a failure's meaning follows from it
// (rule).
type fault int

const (
	// faultBundle: the bundle's (or its sha's). Reported failed and the sha is held
	// against a new lease (rule.hold).
	faultBundle fault = iota + 1
	// faultBox: the box's (docker down, a full disk, a state dir that cannot be
	// written, a refused login), or a failure of no known code. Reported failed with
	// its code, never held against the sha: the next tick tries again by itself.
	faultBox
	// faultTemporary: exit 75, nothing reported or held; the next tick (or the
	// first after tenancy's Retry-After) tries again. A tick stopped after promote
	// leaves the release where it is: the next tick resumes it without a lease.
	faultTemporary
	// faultTenancy: tenancy refused the box itself (its token, its env); a report
	// would be refused too. Nothing is reported or held.
	faultTenancy
)

// String names the fault as docs/OPERATIONS.md does.
func (f fault) String() string {
	switch f {
	case faultBundle:
		return "bundle"
	case faultBox:
		return "box"
	case faultTemporary:
		return "temporary"
	case faultTenancy:
		return "tenancy"
	}
	return "unknown"
}

// holdUntilRetry is rule.hold of a failure that holds its sha until tenancy asks
// with retry (or publishes another sha).
const holdUntilRetry time.Duration = -1

// secretHold is how long a missing or denied secret holds its sha: writing the
// secret (or fixing the policy) mends the box by itself within it, and a secret that
// stays missing costs at most one lease per secretHold.
const secretHold = time.Hour

// rule is what a failure of one code means.
type rule struct {
	fault fault
	// hold is how long the sha of a failed apply is held against a new lease: 0
	// never (the next tick tries again), holdUntilRetry until tenancy asks with
	// retry, or a duration after which the box tries again by itself.
	hold time.Duration
	// next is what an operator does about it: one line, for status and the docs.
	next string
}

// The rows of rules, by fault: a failure that is the bundle's holds its sha until
// tenancy asks with retry (bundleHeldFor: for a while); any other holds nothing.
func bundleFault(next string) rule                    { return rule{faultBundle, holdUntilRetry, next} }
func bundleHeldFor(d time.Duration, next string) rule { return rule{faultBundle, d, next} }
func boxFault(next string) rule                       { return rule{faultBox, 0, next} }
func temporaryFault(next string) rule                 { return rule{faultTemporary, 0, next} }
func tenancyFault(next string) rule                   { return rule{faultTenancy, 0, next} }

// rules is the one table of what each code means. A code missing from it fails
// TestEveryCodeHasARule; docs/OPERATIONS.md's table is rendered from it
// (TestOperationsTableIsTheRules).
var rules = map[codes.Code]rule{
	// Bundle refusals: before the lease; the sha is held until tenancy asks again.
	codes.BundleMalformed: bundleFault("re-publish the bundle (a renderer bug or a corrupted upload); `monky-deployd verify --env ENV BUNDLE` reproduces the refusal offline"),
	codes.SHAMismatch:     bundleFault("re-publish the bundle: the bytes received are not the sha tenancy asked for (a corrupted store or a proxy in the path)"),
	codes.EnvMismatch:     bundleFault("publish the bundle to the right env, or fix env_id in the config if the box's is wrong"),
	codes.ManifestPaths:   bundleFault("fix the renderer's output: an unsafe path, a non-regular entry or a files list that is not the tar's"),
	codes.ComposeInvalid:  bundleFault("fix the compose file; the detail has compose-go's message"),
	codes.UnresolvedVars:  bundleFault("add the variable to the manifest's vars or secrets, or give it a default (${X:-v})"),
	codes.SecretPath:      bundleFault("fix the manifest: secret paths are relative to envs/<env_id>/"),
	codes.Privileged:      bundleFault("remove the privilege from the bundle, or list the service in the box's compose.allow_privileged"),
	codes.Rollback:        bundleFault("roll back explicitly from the console (the check-in's rollback: true)"),
	codes.HookInvalid:     bundleFault("fix the manifest's hooks: each names a one-shot service (no restart always or unless-stopped) of the compose files, behind the monky-hooks profile, once"),
	// DISK_LOW is a refusal of the box: freeing space keeps the sha.
	codes.DiskLow: boxFault("free space under deploy_dir (lower compose.keep_releases, remove the images the detail names); the next tick verifies the bundle again"),

	// Signature refusals: their fix (a new signature, a key added to the box) keeps
	// the sha, and checking again costs a small GET, never a lease.
	codes.SignatureMissing:    boxFault("sign the bundle (`monky-deployd sign`) and publish its signature, or remove trusted_keys from the config to run unsigned bundles"),
	codes.SignatureInvalid:    boxFault("sign this very bundle again for this env, sha and serial: the detail names the field that differs; if nobody re-packed it, treat it as an attack"),
	codes.SignatureUnknownKey: boxFault("add the signing key to trusted_keys, or sign with a key the box trusts"),
	codes.SignatureExpired:    boxFault("sign the bundle again with a later --expires (or none); check the box's clock"),
	codes.SignatureReplay:     boxFault("publish a newer serial, or roll back explicitly from the console (rollback: true) to a signed older bundle"),

	// Later phases.
	codes.LeaseShape: bundleFault("fix tenancy's lease issuer or the OpenBao role: the lease or login answer has the wrong shape (there is no AppRole path)"),
	// Writing the secret (or fixing the policy) mends the box by itself: the sha is
	// held an hour, then tried again.
	codes.SecretMissing: bundleHeldFor(secretHold, "write the secret at <kv_mount>/data/envs/<env_id>/<path> (the detail names the variable, path and key); the box tries again by itself within the hour (status names when)"),
	codes.SecretDenied:  bundleHeldFor(secretHold, "fix the see-env policy or role in OpenBao (docs/OPERATIONS.md, \"Server side\"); the box tries again by itself within the hour (status names when)"),
	codes.ApplyFailed:   bundleFault("read the report's tail (compose's output): compose refused or could not start the release; the previous release was restored, unless the release says restore: unsafe (then status says a person decides)"),
	codes.Unhealthy:     bundleFault("read the health evidence `monky-deployd status` shows (each failing service's last healthchecks and log lines); the previous release was restored, unless the release says restore: unsafe (then status says a person decides)"),
	codes.HealthTimeout: bundleFault("a slow start: read the health evidence `monky-deployd status` shows, or raise compose.health_timeout (and the unit's TimeoutStartSec); the previous release was restored, unless the release says restore: unsafe (then status says a person decides)"),
	codes.ConfigInvalid: boxFault("fix the config: the message names the file, the key and its line"),
	// Hooks (docs/BUNDLE.md, "Hooks"). A hook that fails is the release's; one that
	// asks for later (exit 75) costs no report and no new lease while the lease lasts.
	codes.HookFailed:      bundleFault("read the hook's output (`monky-deployd status`, the report's tail); before the switch nothing changed, after it the previous release was restored unless the release says restore is unsafe (then status says a person decides)"),
	codes.HookLater:       temporaryFault("nothing unless it lasts: a hook asked to try again later (exit 75); the next tick runs it again under the same lease"),
	codes.HookInterrupted: bundleFault("a crash interrupted a hook the release does not mark repeatable: check what it did (its service's containers and data), then retry from the console"),
	codes.Config:          boxFault("fix the config's bao section (addr, mounts, role, ca_file): the message names the key"),

	// Tenancy phase. UNAUTHENTICATED is the box's credentials: from OpenBao (the
	// lease's grant refused at login, most often superseded by a newer lease) it is
	// reported; from tenancy itself it is tenancy's (classify).
	codes.AgentEnvMismatch: tenancyFault("fix env_id in the config, or place a fresh grant of this env and run `monky-deployd bootstrap`"),
	codes.RateLimited:      temporaryFault("wait: the lease budget refills within the hour (status names when the box asks again); look for a flapping deploy burning leases"),
	codes.Unauthenticated:  boxFault("re-bootstrap: place a fresh bootstrap grant (mode 0600) at the config's bootstrap_grant and run `monky-deployd bootstrap`"),
	codes.Unavailable:      temporaryFault("nothing unless it lasts: then check the mesh or tunneler, tenancy and OpenBao"),
	codes.TenancyProtocol:  temporaryFault("nothing unless it lasts: then look for a proxy answering in tenancy's place, or a tenancy of another version (the log line names the call and the field)"),

	// The box itself.
	codes.Locked:            temporaryFault("nothing: another run holds the lock; if it lasts, look for a hung `docker compose up`"),
	codes.Interrupted:       temporaryFault("nothing: the next tick resumes where this one stopped"),
	codes.ComposeMissing:    boxFault("install the docker compose v2 plugin (docker-compose-plugin, docker-compose-v2 or docker-compose 2.x)"),
	codes.StateUnavailable:  boxFault("fix the file system of state_dir or deploy_dir (mode, space, mount, ReadWritePaths=): the log line names the file and the error"),
	codes.DockerUnavailable: boxFault("start docker (`systemctl start docker`) or fix the agent's access to its socket; the next tick goes on"),
	codes.DiskFull:          boxFault("free space on the file systems of deploy_dir and state_dir; the next tick goes on"),
	codes.DockerTimeout:     temporaryFault("nothing unless it lasts: then the box is overloaded or dockerd hangs (`systemctl status docker`, `journalctl -u docker`); the next tick tries again"),
	codes.Unclassified:      boxFault("read the tick's log line (`journalctl -u monky-deployd -p warning`): its err says what failed; the next tick tries again"),

	// Images, before the lease.
	codes.ImageMissing:        boxFault("push the image the failure names, fix its reference in the renderer, or `docker login` to its registry as root on this box; the next tick pulls again without a lease"),
	codes.RegistryUnavailable: temporaryFault("check that this box reaches the image's registry (`docker pull <image>` as root); the next tick pulls again without a lease"),
	codes.PullFailed:          boxFault("read what docker said (the detail) and `journalctl -u docker`: the box's docker could not store the image; the next tick pulls again without a lease"),
}

// ruleOf is the rule of code; a code the table does not know is UNCLASSIFIED's.
func ruleOf(code codes.Code) rule {
	if r, ok := rules[code]; ok {
		return r
	}
	return rules[codes.Unclassified]
}

// exit is the exit code of a failure of code under r: 75 for a temporary one, 78
// for AGENT_ENV_MISMATCH, 1 otherwise.
func (r rule) exit(code codes.Code) int {
	switch {
	case r.fault == faultTemporary:
		return ExitTemporary
	case code == codes.AgentEnvMismatch:
		return ExitEnvMismatch
	}
	return ExitFailed
}

// verdict is what classify makes of an error: its code and what the code means.
type verdict struct {
	code codes.Code
	rule rule
}

// classify is the only reader of rules: the code of err (codeOf) and its rule, with
// two refinements the code alone cannot tell: tenancy refusing the box's credentials
// is tenancy's (a report would be refused too), and a bundle refusal is the box's
// only when each of its refusals is (DISK_LOW alone).
func classify(err error) verdict {
	code := codeOf(err)
	v := verdict{code: code, rule: ruleOf(code)}
	var call *tenancy.APIError
	var refused *bundle.RefusedError
	switch {
	case code == codes.Unauthenticated && errors.As(err, &call):
		v.rule.fault = faultTenancy
	case errors.As(err, &refused) && rules[code].fault == faultBundle:
	case errors.As(err, &refused):
		// The first refusal that is the bundle's speaks for the rest.
		for _, r := range refused.Refusals {
			if ruleOf(r.Code).fault == faultBundle {
				v.code, v.rule = r.Code, ruleOf(r.Code)
				break
			}
		}
	}
	return v
}

type coder interface{ Code() codes.Code }

// codeOf is the stable code of err. A cause that is the box's wins over the step
// that met it: a write that found no space or inodes is DISK_FULL, a docker daemon
// that cannot be reached DOCKER_UNAVAILABLE, a docker command that did not finish by
// itself DOCKER_TIMEOUT, a cancelled run INTERRUPTED. Then the first code the error's
// chain carries (a step's Error.Code, a cause's Code method); then a file of the box
// that could not be read or written (STATE_UNAVAILABLE). Anything else is
// UNCLASSIFIED: no code claims what did not happen.
func codeOf(err error) codes.Code {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return codes.DiskFull
	case errors.Is(err, compose.ErrDockerUnavailable):
		return codes.DockerUnavailable
	case errors.Is(err, compose.ErrDockerTimeout):
		return codes.DockerTimeout
	case errors.Is(err, context.Canceled):
		return codes.Interrupted
	}
	if code := carriedCode(err); code != "" {
		return code
	}
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	if errors.As(err, &pathErr) || errors.As(err, &linkErr) {
		return codes.StateUnavailable
	}
	return codes.Unclassified
}

// carriedCode is the first code err's chain carries, outermost first: the code a
// step set on its *Error, or what a cause's Code method says; "" when none does.
func carriedCode(err error) codes.Code {
	if ae, ok := err.(*Error); ok && ae.Code != "" { //nolint:errorlint // the walk looks at each link of the chain itself
		return ae.Code
	}
	if c, ok := err.(coder); ok && c.Code() != "" { //nolint:errorlint // the walk looks at each link of the chain itself
		return c.Code()
	}
	switch u := err.(type) { //nolint:errorlint // the walk looks at each link of the chain itself
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return carriedCode(next)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			if code := carriedCode(next); code != "" {
				return code
			}
		}
	}
	return ""
}

// CodeOf returns the stable code of err: a bundle refusal code, a code of the
// tenancy, OpenBao or compose client, or one of the agent's own; "" for nil. A cause
// that is the box's wins over the step that met it (DISK_FULL, DOCKER_UNAVAILABLE);
// an error the agent has no code for is codes.Unclassified.
func CodeOf(err error) codes.Code { return classify(err).code }

// IsTemporary reports whether err is worth retrying at the next tick without
// reporting it (exit 75): its code's fault is temporary in the agent's one table of
// what failures mean (docs/OPERATIONS.md, "What each code means").
func IsTemporary(err error) bool {
	return err != nil && classify(err).rule.fault == faultTemporary
}

// ExitCode maps the error of a tick onto the exit code contract: nil is 0, an env
// mismatch 78, a temporary condition 75, anything else 1.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	v := classify(err)
	return v.rule.exit(v.code)
}

// NextStepUnknown is the next step of a code the table does not know, or of a failure
// whose code is not known: the journal's tick line names it.
const NextStepUnknown = "read the tick's log line: `journalctl -u monky-deployd -p warning`"

// NextStep says what an operator does about code: one line, for `status`. It is ""
// for no code, and NextStepUnknown for a code it does not know.
func NextStep(code codes.Code) string {
	if code == "" {
		return ""
	}
	if r, ok := rules[code]; ok {
		return r.next
	}
	return NextStepUnknown
}

// Exit codes: the contract with the systemd timer and with `run --loop` (docs/OPERATIONS.md, "Exit codes").
const (
	// ExitOK: applied, nothing to do, or down.
	ExitOK = 0
	// ExitFailed: a refusal, a failed apply, a bad config, unauthenticated.
	ExitFailed = 1
	// ExitTemporary: network, 5xx, 429, OpenBao sealed or unreachable, lock held.
	// The unit treats it as success (SuccessExitStatus=75); the next tick retries.
	ExitTemporary = 75
	// ExitEnvMismatch: AGENT_ENV_MISMATCH. Never retried.
	ExitEnvMismatch = 78
)

// The agent's own conditions, each with its stable code (codes.Code.Sentinel).
var (
	// ErrLocked: another run holds the lock (LOCKED); the tick exits 75 at once.
	ErrLocked = codes.Locked.Sentinel("another monky-deployd run holds the lock")
	// ErrEnvMismatch: tenancy answered AGENT_ENV_MISMATCH, now or at an earlier run
	// (the latch). The tick exits 78 and is never retried.
	ErrEnvMismatch = codes.AgentEnvMismatch.Sentinel(string(codes.AgentEnvMismatch))
	// ErrNoCredentials: no OpenBao token and no bootstrap grant (UNAUTHENTICATED).
	ErrNoCredentials = codes.Unauthenticated.Sentinel("no OpenBao token and no bootstrap grant")
)

// Error is a tick failure with its stable code. Op says what the agent was doing.
type Error struct {
	Op   string
	Code codes.Code
	Err  error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s: %s", e.Op, e.Code)
	}
	return fmt.Sprintf("%s: %v", e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
