// Package faketenancy is a fake of monky-tenancy's agent API (docs/PROTOCOL.md) served
// over real HTTP on 127.0.0.1, and the bundles tenancy publishes (docs/BUNDLE.md). It
// decodes what the agent sends with its own wire structs and code rather than
// deployd/tenancy's (it only stores a live service in tenancy's LiveService), and hashes
// bundles with its own code (SHA) rather than deployd/bundle's, so that tests run the
// agent against an independent witness of the contract; the conformance suite in
// deployd/deploydtest holds it to that contract. It does not import "testing": a
// program may start it (see Start, and deployd/deploydtest/fakestack for both fakes
// wired together).
//
// BuildBundle builds a bundle from a BundleSpec (SampleApp and SampleServices are
// ready-made specs) with its sha. PublishBundle hashes what it is given with SHA, so a
// stream that is not a complete tar (or tar.gz) cannot be published, while a hostile
// but well-formed bundle can, for the agent's refusal tests.
//
// Tokens are judged by an Authority (the fake OpenBao): a bearer must be a live token,
// and its environment must be the one the request names (the body's env_id, or the
// environment a bundle was published for), else 409 AGENT_ENV_MISMATCH. A lease
// answers a fresh grant minted by the Authority, at most LeaseBudget per environment in
// a rolling LeaseWindow; past it the answer is 429 with Retry-After in seconds.
//
// Decisions where the contract is silent, matching what monky-tenancy does:
//   - a malformed body, an unknown result or a sha that is not 64 lowercase hex is 400
//     BAD_REQUEST; a lease or bundle of a sha never published for the environment is
//     404 BUNDLE_NOT_FOUND;
//   - requests refused before a grant is minted (401, 409, 429, 400, 404) do not count
//     against the lease budget;
//   - a lease request that carries the request_id of the environment's last lease,
//     for the same sha, while that lease is unexpired, is answered with the same lease
//     and grant and costs no budget (its first answer was lost on the way); any new
//     lease ends that, and a request without a request_id is always a new lease;
//   - a check-in's live object is decoded strictly in what it knows (kinds, healthy or
//     reason but not both, services with healthy, named services, the agent's caps)
//     and tolerantly in what it does not (unknown fields inside it are ignored); a
//     malformed one is 400 BAD_REQUEST naming the field and the check-in is not
//     recorded. The top level of every body stays strict, to catch an agent's typo.
//     LastLive is the live object of the latest check-in (none: nothing is live);
//   - a check-in's condition object is checked the same way (a stable code, a
//     non-zero exit, runs ≥ 1, RFC 3339 times with since ≤ code_since ≤ last);
//     LastCondition is the condition of the latest check-in (none: its last run
//     ended 0);
//   - PublishSignature stores a bundle's signature file, unchecked, and the signature
//     call serves it byte for byte as text/plain; a bundle without one is 404
//     SIGNATURE_NOT_FOUND, a sha of another environment 409 as for the bundle;
//   - a check-in with no desired state answers action "none"; SetDesired with apply and
//     serial 0 takes the serial the sha was published with;
//   - Faults.Status forces a status on a call before anything else is checked, with the
//     error code that goes with it (401 UNAUTHENTICATED, 409 AGENT_ENV_MISMATCH, 429
//     RATE_LIMITED with Faults.RetryAfter, 5xx UNAVAILABLE).
package faketenancy
