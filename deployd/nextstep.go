package deployd

import "github.com/monky/monky-deployd/deployd/codes"

// nextSteps is the one table of what an operator does about each code
// (docs/OPERATIONS.md, "Codes and what to do next"): `status` prints it. A code of the
// vocabulary without an entry fails TestNextStepCoversEveryCode.
var nextSteps = map[codes.Code]string{
	// Bundle refusals.
	codes.BundleMalformed: "re-publish the bundle (a renderer bug or a corrupted upload); `monky-deployd verify --env ENV BUNDLE` reproduces the refusal offline",
	codes.SHAMismatch:     "re-publish the bundle: the bytes received are not the sha tenancy asked for (a corrupted store or a proxy in the path)",
	codes.EnvMismatch:     "publish the bundle to the right env, or fix env_id in the config if the box's is wrong",
	codes.ManifestPaths:   "fix the renderer's output: an unsafe path, a non-regular entry or a files list that is not the tar's",
	codes.ComposeInvalid:  "fix the compose file; the detail has compose-go's message",
	codes.UnresolvedVars:  "add the variable to the manifest's vars or secrets, or give it a default (${X:-v})",
	codes.SecretPath:      "fix the manifest: secret paths are relative to envs/<env_id>/",
	codes.Privileged:      "remove the privilege from the bundle, or list the service in the box's compose.allow_privileged",
	codes.Rollback:        "roll back explicitly from the console (the check-in's rollback: true)",
	codes.DiskLow:         "free space under deploy_dir (lower compose.keep_releases, remove the images the detail names); the next tick verifies the bundle again",

	// Signature refusals.
	codes.SignatureMissing:    "sign the bundle (`monky-deployd sign`) and publish its signature, or remove trusted_keys from the config to run unsigned bundles",
	codes.SignatureInvalid:    "sign this very bundle again for this env, sha and serial: the detail names the field that differs",
	codes.SignatureUnknownKey: "add the signing key to trusted_keys, or sign with a key the box trusts",
	codes.SignatureExpired:    "sign the bundle again with a later --expires (or none); check the box's clock",
	codes.SignatureReplay:     "publish a newer serial, or roll back explicitly from the console (rollback: true) to a signed older bundle",

	// Later-phase codes.
	codes.LeaseShape:     "fix tenancy's lease issuer or the OpenBao role: the lease or login answer has the wrong shape (there is no AppRole path)",
	codes.SecretMissing:  "write the secret at <kv_mount>/data/envs/<env_id>/<path>; the detail names the variable, path and key",
	codes.SecretDenied:   "fix the see-env policy or role in OpenBao (docs/OPERATIONS.md, \"Server side\")",
	codes.ApplyFailed:    "read the report's tail and `docker compose logs` of the release; the previous release was restored",
	codes.Unhealthy:      "read `docker compose logs` of the release; the previous release was restored",
	codes.HealthTimeout:  "a slow start: raise compose.health_timeout (and the unit's TimeoutStartSec); the previous release was restored",
	codes.ConfigInvalid:  "fix the config: the message names the file, the key and its line",
	codes.Config:         "fix the config's bao section (addr, mounts, role, ca_file): the message names the key",
	codes.ComposeMissing: "install the docker compose v2 plugin (docker-compose-plugin, docker-compose-v2 or docker-compose 2.x)",

	// Tenancy-phase codes.
	codes.AgentEnvMismatch: "fix env_id in the config, or place a fresh grant of this env and run `monky-deployd bootstrap`",
	codes.RateLimited:      "wait: the lease budget refills within the hour; look for a flapping deploy burning leases",
	codes.Unauthenticated:  "re-bootstrap: place a fresh bootstrap grant (mode 0600) at the config's bootstrap_grant and run `monky-deployd bootstrap`",
	codes.Unavailable:      "nothing unless it lasts: then check the mesh or tunneler, tenancy and OpenBao",
	codes.TenancyProtocol:  "nothing unless it lasts: then look for a proxy answering in tenancy's place, or a tenancy of another version (the log line names the call and the field)",

	// Codes of the box itself.
	codes.Locked:              "nothing: another run holds the lock; if it lasts, look for a hung `docker compose up`",
	codes.Interrupted:         "nothing: the next tick resumes where this one stopped",
	codes.StateUnavailable:    "fix the file system of state_dir or deploy_dir (mode, space, mount, ReadWritePaths=): the log line names the file and the error",
	codes.DockerUnavailable:   "start docker (`systemctl start docker`) or fix the agent's access to its socket; the next tick goes on",
	codes.DiskFull:            "free space on the file systems of deploy_dir and state_dir; the next tick goes on",
	codes.ImageMissing:        "push the image the failure names, fix its reference in the renderer, or `docker login` to its registry as root on this box; the next tick pulls again without a lease",
	codes.RegistryUnavailable: "check that this box reaches the image's registry (`docker pull <image>` as root); the next tick pulls again without a lease",
	codes.PullFailed:          "read what docker said (the detail) and `journalctl -u docker`: the box's docker could not store the image; the next tick pulls again without a lease",
	codes.DockerTimeout:       "nothing unless it lasts: then the box is overloaded or dockerd hangs (`systemctl status docker`, `journalctl -u docker`); the next tick tries again",
	codes.Unclassified:        "read the tick's log line (`journalctl -u monky-deployd -p warning`): its err says what failed; the next tick tries again",
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
	if s, ok := nextSteps[code]; ok {
		return s
	}
	return NextStepUnknown
}
