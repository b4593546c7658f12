package deployd

import (
	"errors"
	"syscall"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// fault is whose fault a failed step of an apply or a down is, and so what the tick
// does with it (docs/ARCHITECTURE.md, "Whose fault").
type fault int

const (
	// faultBundle: the bundle's (or its sha's). Reported failed and remembered against
	// the sha: the sha costs no new lease until tenancy asks with retry.
	faultBundle fault = iota + 1
	// faultBox: the box's (docker down, a full disk, a state dir that cannot be
	// written). Reported failed with the box's code, never remembered: the next tick
	// tries again once the condition clears, and the operator is told what to do.
	faultBox
	// faultTemporary: retried at the next tick (exit 75); nothing is reported or
	// remembered.
	faultTemporary
	// faultTenancy: tenancy refused the call itself, or latched the env mismatch; it
	// would refuse a report too. Nothing is reported or remembered.
	faultTenancy
)

// String names the fault as docs/ARCHITECTURE.md does.
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

// faults is the one table of whose fault each code is. A code missing here is the
// bundle's (a test checks that every code of codes.All is listed).
var faults = map[codes.Code]fault{
	codes.BundleMalformed: faultBundle, codes.SHAMismatch: faultBundle, codes.EnvMismatch: faultBundle,
	codes.ManifestPaths: faultBundle, codes.ComposeInvalid: faultBundle, codes.UnresolvedVars: faultBundle,
	codes.SecretPath: faultBundle, codes.Privileged: faultBundle, codes.Rollback: faultBundle,
	codes.DiskLow: faultBox,
	// A signature refusal is not remembered either: its fix (a new signature, a key
	// added to the box) keeps the sha, and checking again costs a small GET, never a
	// lease.
	codes.SignatureMissing: faultBox, codes.SignatureInvalid: faultBox, codes.SignatureUnknownKey: faultBox,
	codes.SignatureExpired: faultBox, codes.SignatureReplay: faultBox,
	// A lease of AppRole shape: a misconfigured lease issuer; the sha cannot succeed
	// as it is, so it costs no lease again until tenancy asks with retry.
	codes.LeaseShape:    faultBundle,
	codes.SecretMissing: faultBundle, codes.SecretDenied: faultBundle,
	codes.ApplyFailed: faultBundle, codes.Unhealthy: faultBundle, codes.HealthTimeout: faultBundle,
	codes.ConfigInvalid: faultBox, codes.Config: faultBox,
	// From tenancy itself these are tenancy's (faultOf); UNAUTHENTICATED from OpenBao
	// (the lease's grant refused at login, most often superseded by a newer lease)
	// is the box's credentials, not the bundle.
	codes.AgentEnvMismatch: faultTenancy, codes.Unauthenticated: faultBox,
	codes.RateLimited: faultTemporary, codes.Unavailable: faultTemporary, codes.TenancyProtocol: faultTemporary,
	codes.DockerTimeout: faultTemporary, codes.Unclassified: faultBox, codes.PullFailed: faultBox,
	codes.Locked: faultTemporary, codes.Interrupted: faultTemporary,
	codes.StateUnavailable: faultBox, codes.ComposeMissing: faultBox,
	codes.DockerUnavailable: faultBox, codes.DiskFull: faultBox,
	// An image the registry lacks is the release's, but it is not remembered either:
	// its fix (pushing the image, a docker login on the box) keeps the sha, and the
	// pull before the lease costs no lease to try again.
	codes.ImageMissing: faultBox, codes.RegistryUnavailable: faultTemporary,
}

// faultOf is whose fault err is. Its code decides (the faults table), with four
// refinements: a temporary error (IsTemporary) is temporary whatever its code; a box
// cause (boxCause) is the box's whatever step met it; an error of a tenancy call
// that tenancy answered is tenancy's, but for a lease of AppRole shape, which no
// retry of the same sha mends; and a bundle refusal is the box's only when every one
// of its refusals is (DISK_LOW alone).
func faultOf(err error) fault {
	var call *tenancy.APIError
	var refused *bundle.RefusedError
	switch {
	case IsTemporary(err):
		return faultTemporary
	case boxCause(err) != "":
		return faultBox
	case errors.As(err, &call) && call.Code() != codes.LeaseShape:
		return faultTenancy
	case errors.As(err, &refused):
		for _, r := range refused.Refusals {
			if faults[r.Code] != faultBox {
				return faultBundle
			}
		}
		return faultBox
	}
	if f, ok := faults[CodeOf(err)]; ok {
		return f
	}
	return faultBundle
}

// boxCause is the box's code of a cause that is the box's whatever step met it: no
// space or inodes left, a docker daemon that cannot be reached, or a docker command
// that did not finish by itself; "" otherwise.
func boxCause(err error) codes.Code {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return codes.DiskFull
	case errors.Is(err, compose.ErrDockerUnavailable):
		return codes.DockerUnavailable
	case errors.Is(err, compose.ErrDockerTimeout):
		return codes.DockerTimeout
	}
	return ""
}

// disposition is what a failure of an apply or a down means for the box and for
// tenancy.
type disposition struct {
	// report: tenancy hears of it (report failed); otherwise the error only ends the
	// tick.
	report bool
	// remember: the sha is remembered as failed and costs no new lease until tenancy
	// asks with retry.
	remember bool
	// restore: the previous release is put back (the failed one was promoted).
	restore bool
}

// dispose is the one place that decides what a failed step means: whose fault it is
// (faultOf), and that a failure remembered before is told again as it was. Whether
// the tick exits 75, 78 or 1 follows from the error itself (ExitCode).
func (t *tick) dispose(err error) disposition {
	var again *repeatedError
	switch f := faultOf(err); {
	case errors.As(err, &again):
		return disposition{report: true}
	case f == faultTemporary, f == faultTenancy:
		return disposition{}
	case f == faultBox, t.down:
		return disposition{report: true, restore: t.promoted}
	default:
		return disposition{report: true, remember: true, restore: t.promoted}
	}
}
