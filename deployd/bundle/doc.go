// Package bundle reads and checks monky-deployd bundles: a tar, optionally
// gzip-compressed, holding manifest.json and the files it lists (docs/BUNDLE.md,
// docs/BUNDLE.md describes the format for renderer authors).
//
// Verify runs every check that can be made before a deploy lease: format and size
// limits, safe paths, the manifest, the bundle sha, the env, the serial, free disk
// space, compose validity, unresolved variables and privileges. It returns every
// refusal at once, each with a stable code (one of codes.Refusals, from the leaf
// package deployd/codes) and a detail that names files, variables, services and
// paths, never a value. The renderer's CI and the agent run the same function on the
// same bytes.
//
// SHA computes the bundle sha alone, Extract unpacks a verified bundle safely into
// a staging directory (recomputing the sha as it writes) and RenderEnv writes the
// release's .env.
//
// For the renderer, PackDir and Pack build a bundle reproducibly from a directory
// (sorted entries, fixed metadata, the sha computed as it streams) and Sign signs
// what it states (Statement: sha, env_id, serial, an optional expiry) with Ed25519.
// On a box that trusts keys (KeyRing, ParsePublicKey), CheckSignature and
// CheckReplay decide before the lease whether a bundle's signature lets it run,
// each refusal a *SignatureError with one of codes.Signatures (docs/BUNDLE.md,
// "Signatures").
//
// Every function reads its stream once, hashes files as they pass and keeps only
// manifest.json and small candidate compose files in memory, so memory stays flat
// however large the bundle is. Limits bound entries, sizes and headers; passing
// one is BUNDLE_MALFORMED, detected while streaming.
//
// Decisions where the contract is silent (docs/BUNDLE.md has the full list):
//   - A leading "./" on entry names (what `tar -C dir -cf b.tar .` writes) is
//     accepted and is not part of the path; "." and "./" directory entries are
//     skipped. "x" and "./x" in one tar are duplicates.
//   - manifest.json may be anywhere in the tar; putting it first lets Verify keep
//     only the compose files in memory.
//   - A PAX global header is accepted only when it carries nothing but a comment
//     (git archive writes one); GNU sparse files count as regular files.
//   - Variable names starting with COMPOSE_ or DOCKER_ are refused: compose and the
//     docker CLI read them from .env to choose files, project and daemon. So are
//     BUILDX_, BUILDKIT_ and LD_ names and PATH, HOME, TMPDIR, SSH_AUTH_SOCK, the
//     proxy and SSL_CERT_ variables: some compose releases copy .env into their own
//     environment, where these would steer compose and the programs it runs.
//   - A root .env in the bundle, or anything under .env/, is refused
//     (MANIFEST_PATHS): the agent renders the release's .env itself.
//   - Secret paths are an allow-list (see SecretRef) and never name another env.
//   - Extract ignores modes in the tar: files 0644, directories 0755.
//
// The package depends on the standard library (crypto/ed25519 and crypto/x509 for
// the signatures), compose-go and the leaf packages
// deployd/codes and deployd/ids only; a test keeps
// OpenZiti, vault/api and testing out of its dependencies.
package bundle
