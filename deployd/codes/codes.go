// Package codes is the one vocabulary of stable codes of monky-deployd: the refusal
// codes of a bundle, the codes of the later phases (lease, secrets, apply, health), of
// the tenancy phase and of the box itself.
//
// A code is part of the wire contract: it appears in the reports tenancy receives, in
// `monky-deployd verify --json`, in `state.json`, in `status`, in the metrics and in
// the journal, always as the plain string of the constant, and it never changes
// meaning. Every error type of the module that carries a code returns it from a
// `Code() codes.Code` method; `deployd.CodeOf` finds it with errors.As.
// docs/BUNDLE.md ("Refusal codes") and docs/OPERATIONS.md ("Codes and what to do next")
// say when each fires and what to do about it.
//
// The package imports nothing but the standard library, so that every package of the
// module, deployd/bundle first, can import it.
package codes

import "slices"

// Code is a stable code. Its string is what the wire, the files and the logs carry.
type Code string

// The refusal codes of a bundle (docs/BUNDLE.md, "Refusal codes"). bundle.Verify
// returns them before any lease is taken.
const (
	// BundleMalformed is a bundle that is not a tar or gzip stream, is truncated, has
	// duplicate entries, no or an invalid manifest, an unknown schema, or passes a size
	// limit. Tenancy also reports a bundle larger than the client's cap with it.
	BundleMalformed Code = "BUNDLE_MALFORMED"
	// SHAMismatch is a bundle whose computed sha differs from the one asked for.
	SHAMismatch Code = "SHA_MISMATCH"
	// EnvMismatch is a manifest whose env_id is not the box's.
	EnvMismatch Code = "ENV_MISMATCH"
	// ManifestPaths is an unsafe path, a non-regular entry, files not equal to the
	// tar's files, or a compose, env or label file that is not a file of the bundle.
	ManifestPaths Code = "MANIFEST_PATHS"
	// ComposeInvalid is a compose file that compose-spec rejects, or that would make
	// compose read files outside the bundle.
	ComposeInvalid Code = "COMPOSE_INVALID"
	// UnresolvedVars is a variable of the compose files that neither vars, secrets nor
	// a default provides.
	UnresolvedVars Code = "UNRESOLVED_VARS"
	// SecretPath is a secret reference, mount or env id whose path would leave the
	// env's root.
	SecretPath Code = "SECRET_PATH"
	// Privileged is a service that asks for host privileges the box does not allow it.
	Privileged Code = "PRIVILEGED"
	// Rollback is a manifest serial lower than the live release's, without an explicit
	// rollback in the check-in.
	Rollback Code = "ROLLBACK"
	// DiskLow is free space under deploy_dir below what the release needs. Unlike the
	// other refusals it is not remembered against the sha.
	DiskLow Code = "DISK_LOW"
	// HookInvalid is a manifest hook that names a service the compose files do not
	// define, one that is not one-shot (restart always or unless-stopped), one that
	// `docker compose up` would start (not behind the monky-hooks profile), a service
	// named twice, or a timeout out of range.
	HookInvalid Code = "HOOK_INVALID"
)

// The refusal codes of a bundle's signature (docs/BUNDLE.md, "Signatures"). On a box
// that trusts signing keys, bundle.CheckSignature and bundle.CheckReplay return them
// before any lease is taken; `monky-deployd verify --key` returns them too.
const (
	// SignatureMissing is a bundle without a signature on a box that trusts keys.
	SignatureMissing Code = "SIGNATURE_MISSING"
	// SignatureInvalid is a signature that does not parse (truncated, another
	// algorithm), does not verify with the key it names, or was made for another
	// bundle: another sha, env_id or serial.
	SignatureInvalid Code = "SIGNATURE_INVALID"
	// SignatureUnknownKey is a signature by a key the box does not trust (never
	// configured, or removed after a rotation).
	SignatureUnknownKey Code = "SIGNATURE_UNKNOWN_KEY"
	// SignatureExpired is a signature whose expiry passed, beyond the clock tolerance.
	SignatureExpired Code = "SIGNATURE_EXPIRED"
	// SignatureReplay is a signed serial lower than the highest the box applied under
	// a key it still trusts, without an explicit rollback.
	SignatureReplay Code = "SIGNATURE_REPLAY"
)

// The codes of the phases after the verification: lease, login, secrets, apply,
// health, and the config.
const (
	// LeaseShape is a lease or login answer of the wrong shape (AppRole, response
	// wrapping, a grant that is not a JWT, a limited-use token, …).
	LeaseShape Code = "LEASE_SHAPE"
	// SecretMissing is a referenced secret or key that does not exist, or whose latest
	// version was deleted.
	SecretMissing Code = "SECRET_MISSING"
	// SecretDenied is a KV read that OpenBao refused (403).
	SecretDenied Code = "SECRET_DENIED"
	// ApplyFailed is `docker compose up` (or down) exiting non-zero: compose refused
	// or could not start the release.
	ApplyFailed Code = "APPLY_FAILED"
	// Unhealthy is a service that went unhealthy, exited non-zero or restart-looped.
	Unhealthy Code = "UNHEALTHY"
	// HealthTimeout is a release whose services were not all ready within the health
	// timeout.
	HealthTimeout Code = "HEALTH_TIMEOUT"
	// ConfigInvalid is a config that does not parse or validate.
	ConfigInvalid Code = "CONFIG_INVALID"
	// Config is the OpenBao client's own code for a client configuration it cannot
	// work with (docs/PROTOCOL.md); the agent reports it as ConfigInvalid.
	Config Code = "CONFIG"
	// HookFailed is a hook of the release (docs/BUNDLE.md, "Hooks") that exited
	// non-zero (other than 75) or did not finish within its timeout: before the
	// switch nothing was switched; after it, it counts as unhealthy.
	HookFailed Code = "HOOK_FAILED"
	// HookLater is a hook before the switch that exited 75, "try again later":
	// nothing switched, nothing reported, exit 75; the next tick runs it again under
	// the same lease while the lease lasts. Temporary.
	HookLater Code = "HOOK_LATER"
	// HookInterrupted is a hook that a crash (SIGKILL, power loss) interrupted and
	// that its release does not mark repeatable: the agent does not run it again by
	// itself; a person decides (tenancy's retry runs it again).
	HookInterrupted Code = "HOOK_INTERRUPTED"
)

// The codes of the tenancy phase: the answers of tenancy and OpenBao.
const (
	// AgentEnvMismatch is tenancy saying the token is not for this env. The agent
	// latches it and exits 78 without retrying.
	AgentEnvMismatch Code = "AGENT_ENV_MISMATCH"
	// RateLimited is the env's lease budget spent (429). Temporary.
	RateLimited Code = "RATE_LIMITED"
	// Unauthenticated is tenancy answering 401, or OpenBao refusing the token or grant.
	Unauthenticated Code = "UNAUTHENTICATED"
	// Unavailable is tenancy or OpenBao answering 5xx, sealed, timed out or
	// unreachable. Temporary.
	Unavailable Code = "UNAVAILABLE"
	// TenancyProtocol is an answer of tenancy that breaks the contract: a status it
	// does not document, a body that is not the JSON of the call, a field out of
	// range (a proxy's error page in the path, a tenancy of another version).
	// Temporary: nothing was done on its word.
	TenancyProtocol Code = "TENANCY_PROTOCOL"
)

// The codes of the box itself: the journal's tick line and `status` carry them. A
// failure of an apply or a down with one of them is the box's fault, not the
// bundle's: it is reported with its code, never remembered against the sha, and the
// next tick tries again once the condition clears (docs/ARCHITECTURE.md, "Whose
// fault").
const (
	// Locked is another run holding state_dir/lock. Temporary.
	Locked Code = "LOCKED"
	// Interrupted is a tick stopped mid-way by a signal or a deadline. Temporary: the
	// next tick resumes.
	Interrupted Code = "INTERRUPTED"
	// ComposeMissing is no docker compose v2 plugin where the docker CLI looks for it.
	ComposeMissing Code = "COMPOSE_MISSING"
	// StateUnavailable is the state dir, state.json, bao.token, the lock or the
	// releases directory that cannot be read or written.
	StateUnavailable Code = "STATE_UNAVAILABLE"
	// DockerUnavailable is a docker daemon that cannot be reached (no socket, dockerd
	// stopped or restarting), before the lease or during an apply.
	DockerUnavailable Code = "DOCKER_UNAVAILABLE"
	// DiskFull is a write that failed for want of space or inodes (ENOSPC, EDQUOT)
	// under deploy_dir or state_dir, or a state dir without room for the token and
	// the state before the lease.
	DiskFull Code = "DISK_FULL"
	// DockerTimeout is a docker command that did not finish by itself: it outlived
	// the bound the agent sets for it (a pull, a read of the containers' state), or
	// a signal the agent did not send killed it. The box is slow or docker hangs; the
	// release is not at fault. Temporary. (The health wait's bound is the release's:
	// HEALTH_TIMEOUT.)
	DockerTimeout Code = "DOCKER_TIMEOUT"
	// Unclassified is a failure the agent has no code for. It claims nothing about
	// whose fault it is: it is reported, never remembered against the sha, and the
	// log line's err says what failed.
	Unclassified Code = "UNCLASSIFIED"
)

// The codes of a release's images, pulled before the lease (docs/ARCHITECTURE.md,
// "Images before the lease").
const (
	// ImageMissing is an image the registry does not have (no such repository or
	// tag, none for the box's platform), or denies to the box (no registry login
	// there), or that pull_policy never forbids pulling and the box does not hold.
	// Reported failed before the lease; not remembered against the sha, so that a
	// pushed image or a docker login on the box lets the next tick apply.
	ImageMissing Code = "IMAGE_MISSING"
	// RegistryUnavailable is an image pull that failed for the registry or the
	// network (unreachable, timed out, 5xx, rate limited). Temporary: no lease, exit
	// 75, the next tick pulls again.
	RegistryUnavailable Code = "REGISTRY_UNAVAILABLE"
	// PullFailed is an image pull that docker ended non-zero for a reason that is
	// neither the image's (IMAGE_MISSING) nor the network's (REGISTRY_UNAVAILABLE)
	// nor the disk's (DISK_FULL): the box's docker could not store or unpack it.
	// Reported failed before the lease, not remembered against the sha.
	PullFailed Code = "PULL_FAILED"
)

var (
	refusals = []Code{
		BundleMalformed, SHAMismatch, EnvMismatch, ManifestPaths, ComposeInvalid,
		UnresolvedVars, SecretPath, Privileged, Rollback, DiskLow, HookInvalid,
	}
	signatures = []Code{SignatureMissing, SignatureInvalid, SignatureUnknownKey, SignatureExpired, SignatureReplay}
	later      = []Code{LeaseShape, SecretMissing, SecretDenied, ApplyFailed, Unhealthy, HealthTimeout, ConfigInvalid, Config, HookFailed, HookLater, HookInterrupted}
	tenancy    = []Code{AgentEnvMismatch, RateLimited, Unauthenticated, Unavailable, TenancyProtocol}
	box        = []Code{Locked, Interrupted, ComposeMissing, StateUnavailable, DockerUnavailable, DiskFull, DockerTimeout, Unclassified}
	images     = []Code{ImageMissing, RegistryUnavailable, PullFailed}
)

// Refusals returns the refusal codes of a bundle, in the order of the table of
// docs/BUNDLE.md.
func Refusals() []Code { return slices.Clone(refusals) }

// Signatures returns the refusal codes of a bundle's signature, in the order of
// docs/BUNDLE.md ("Signatures").
func Signatures() []Code { return slices.Clone(signatures) }

// All returns every stable code: the refusals, the signature refusals, then the
// later-phase, tenancy-phase and box codes, in the order of docs/OPERATIONS.md.
func All() []Code { return slices.Concat(refusals, signatures, later, tenancy, box, images) }
