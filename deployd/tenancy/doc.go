// Package tenancy is the client of the four agent calls of monky-tenancy: check-in,
// bundle download, deploy lease and report (docs/PROTOCOL.md).
//
// A Client is built from a Config. The transport (OpenZiti SDK, local proxy or the
// system network) is the caller's *http.Client; this package only speaks the protocol.
// Every call carries "Authorization: Bearer <OpenBao token>", the agent's User-Agent
// and "Content-Type: application/json", and runs under a deadline (Config.Timeout, or
// Config.BundleTimeout for the download).
//
// # Errors
//
// Every failure of a call is an *APIError. Its kind is one of the sentinels, matched
// with errors.Is, and its Code method returns the stable code the agent reports:
//
//	401                                   ErrUnauthenticated  UNAUTHENTICATED
//	409, or 403 with AGENT_ENV_MISMATCH   ErrEnvMismatch      AGENT_ENV_MISMATCH
//	429 (Retry-After kept)                ErrRateLimited      RATE_LIMITED
//	408, 5xx, timeouts, refused, reset    ErrUnavailable      UNAVAILABLE
//	AppRole/wrapped or malformed lease    ErrLeaseShape       LEASE_SHAPE
//	bundle larger than MaxBundleSize      ErrBundleTooLarge   BUNDLE_MALFORMED
//	anything else that breaks the contract ErrProtocol        TENANCY_PROTOCOL
//
// Whether a code means "retry at the next tick" (exit 75) is the agent's decision,
// made in one table (deployd.IsTemporary); RetryAfter returns the server's
// Retry-After.
//
// Error texts never carry the bearer, the grant or anything the server echoed back
// verbatim: from an error body only error.code (if it looks like a code) and a
// sanitised message of at most 200 bytes are kept, with the bearer, JWT-like,
// OpenBao-token-like and long opaque strings masked (internal/scrub, shared with
// deployd/bao). Non-JSON error bodies are dropped.
//
// # Decisions where the contract is silent
//
//   - The check-in response is validated strictly on what the agent acts on (action,
//     a 64 lowercase hex sha and a serial ≥ 1 with apply, next_checkin_s ≥ 0) and
//     tolerant of fields it does not know, so that tenancy can add fields without
//     breaking a fleet. Flags that do not belong to the action are dropped (a stray
//     "purge": true on apply never reaches the agent).
//   - Report accepts any 2xx (204 is what the contract promises; the conformance suite
//     in deployd/deploydtest holds the server to exactly 204).
//   - A lease is refused as LEASE_SHAPE, naming the field, when it has an AppRole or
//     response-wrapped shape, when the grant is not a JWT, when auth_mount or role
//     differ from the expected ones, or when expires_at is missing, unparsable or not
//     in the future. Secret-looking fields of a refused lease (secret_id,
//     wrapping_token, …) are still added to Config.Secrets so that they cannot leak.
//   - The check-in's live object (Checkin.Live) is checked before sending (ErrInvalidArgument
//     naming the field) and bounded as it is encoded: a reason of at most MaxLiveReason
//     bytes, at most MaxLiveServices services, names, states and healths of at most
//     MaxLiveField bytes, so that the heartbeat stays small whatever docker answers.
//   - Redirects are never followed: the bearer goes to Config.BaseURL only, and a 3xx
//     answer is ErrProtocol.
//   - A 404 on a bundle is ErrProtocol: tenancy asked for a sha it does not serve. The
//     next check-in names the current sha.
//   - The bundle is streamed into the caller's writer and never buffered whole; a body
//     that passes MaxBundleSize (or announces it in Content-Length) is ErrBundleTooLarge.
package tenancy
