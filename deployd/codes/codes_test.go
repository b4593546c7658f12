package codes_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/monky/monky-deployd/deployd/codes"

	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

// TestWireStrings pins the string of every code: they are the wire contract.
func TestWireStrings(t *testing.T) {
	want := map[codes.Code]string{
		codes.BundleMalformed: "BUNDLE_MALFORMED", codes.SHAMismatch: "SHA_MISMATCH",
		codes.EnvMismatch: "ENV_MISMATCH", codes.ManifestPaths: "MANIFEST_PATHS",
		codes.ComposeInvalid: "COMPOSE_INVALID", codes.UnresolvedVars: "UNRESOLVED_VARS",
		codes.SecretPath: "SECRET_PATH", codes.Privileged: "PRIVILEGED",
		codes.Rollback: "ROLLBACK", codes.DiskLow: "DISK_LOW",
		codes.SignatureMissing: "SIGNATURE_MISSING", codes.SignatureInvalid: "SIGNATURE_INVALID",
		codes.SignatureUnknownKey: "SIGNATURE_UNKNOWN_KEY", codes.SignatureExpired: "SIGNATURE_EXPIRED", codes.SignatureReplay: "SIGNATURE_REPLAY",
		codes.LeaseShape: "LEASE_SHAPE", codes.SecretMissing: "SECRET_MISSING",
		codes.SecretDenied: "SECRET_DENIED", codes.ApplyFailed: "APPLY_FAILED",
		codes.Unhealthy: "UNHEALTHY", codes.HealthTimeout: "HEALTH_TIMEOUT",
		codes.ConfigInvalid: "CONFIG_INVALID", codes.Config: "CONFIG",
		codes.AgentEnvMismatch: "AGENT_ENV_MISMATCH", codes.RateLimited: "RATE_LIMITED",
		codes.Unauthenticated: "UNAUTHENTICATED", codes.Unavailable: "UNAVAILABLE",
		codes.Locked: "LOCKED", codes.Interrupted: "INTERRUPTED",
		codes.ComposeMissing: "COMPOSE_MISSING", codes.StateUnavailable: "STATE_UNAVAILABLE",
		codes.DockerUnavailable: "DOCKER_UNAVAILABLE", codes.DiskFull: "DISK_FULL",
		codes.ImageMissing: "IMAGE_MISSING", codes.RegistryUnavailable: "REGISTRY_UNAVAILABLE",
		codes.TenancyProtocol: "TENANCY_PROTOCOL", codes.DockerTimeout: "DOCKER_TIMEOUT",
		codes.Unclassified: "UNCLASSIFIED", codes.PullFailed: "PULL_FAILED",
		codes.HookInvalid: "HOOK_INVALID", codes.HookFailed: "HOOK_FAILED",
		codes.HookLater: "HOOK_LATER", codes.HookInterrupted: "HOOK_INTERRUPTED",
	}
	all := codes.All()
	assert.Len(t, all, len(want), "All lists every code once")
	seen := map[codes.Code]bool{}
	for _, c := range all {
		assert.False(t, seen[c], "%s twice in All", c)
		seen[c] = true
		assert.Equal(t, want[c], string(c))
	}
}

func TestRefusals(t *testing.T) {
	assert.Equal(t, []codes.Code{
		codes.BundleMalformed, codes.SHAMismatch, codes.EnvMismatch, codes.ManifestPaths,
		codes.ComposeInvalid, codes.UnresolvedVars, codes.SecretPath, codes.Privileged,
		codes.Rollback, codes.DiskLow, codes.HookInvalid,
	}, codes.Refusals())
	assert.Equal(t, codes.Refusals(), codes.All()[:len(codes.Refusals())], "All starts with the refusals")
	r := codes.Refusals()
	r[0] = "CHANGED"
	assert.Equal(t, codes.BundleMalformed, codes.Refusals()[0], "Refusals returns a copy")
}

func TestSignatures(t *testing.T) {
	assert.Equal(t, []codes.Code{
		codes.SignatureMissing, codes.SignatureInvalid, codes.SignatureUnknownKey,
		codes.SignatureExpired, codes.SignatureReplay,
	}, codes.Signatures())
	n := len(codes.Refusals())
	assert.Equal(t, codes.Signatures(), codes.All()[n:n+len(codes.Signatures())], "All lists them after the refusals")
	s := codes.Signatures()
	s[0] = "CHANGED"
	assert.Equal(t, codes.SignatureMissing, codes.Signatures()[0], "Signatures returns a copy")
}

// TestLeaf checks that the package imports nothing but the standard library, so that
// every package of the module can import it.
func TestLeaf(t *testing.T) {
	assert.Equal(t, []string{"github.com/monky/monky-deployd/deployd/codes"}, testprog.NonStdDeps(t, "."))
}
