// Package bao is monky-deployd's OpenBao client: JWT login with a deploy grant,
// token lookup-self, renew-self and revoke-self, and KV v2 reads pinned to the box's
// env (docs/PROTOCOL.md). docs/PROTOCOL.md ("OpenBao: how the agent uses it") describes the
// wire exchange and the server side configuration.
//
// # Decisions
//
// Immune to the environment. vault/api's api.NewClient always calls DefaultConfig,
// which reads every VAULT_* variable (VAULT_ADDR, VAULT_AGENT_ADDR, VAULT_CACERT,
// VAULT_SKIP_VERIFY, VAULT_MAX_RETRIES, VAULT_RATE_LIMIT, VAULT_HTTP_PROXY, …) and
// fails outright when one of them is malformed (VAULT_CACERT naming a missing file,
// VAULT_MAX_RETRIES=x, VAULT_HEADERS with an X-Vault- key); NewClient then also
// takes VAULT_TOKEN, VAULT_NAMESPACE and VAULT_HEADERS, and every request consults
// VAULT_WRAP_TTL. None of that can be undone after the fact for the failure case, so
// this package does not build an api.Client: it sends its few requests with net/http
// and decodes them with vault/api's wire types (api.SecretAuth, api.SecretWrapInfo,
// api.ErrorResponse) and header names. No code path reads an environment variable,
// and the default transport has no proxy (pass Config.HTTPClient for one).
//
// One token per call. The Client holds no token; every call takes the token it
// sends, in X-Vault-Token.
//
// The token goes only to Config.Addr. Redirects are not followed (vault/api follows
// one, with the token): a 3xx answer — a standby node that does not forward — is
// ErrUnavailable, retried at the next tick. No call is retried inside the package:
// the timer's next tick is the retry.
//
// Errors. Every failure is an *Error with one sentinel Kind (errors.Is) and a stable
// Code. The server's error messages are kept for the operator after the request's
// credential and anything shaped like a JWT, a token or a long opaque run is masked
// (internal/scrub, shared with deployd/tenancy); a body that is not OpenBao's
// {"errors":[…]} JSON is never quoted.
//
// Secrets. The grant, every token and every value of every secret read are added to
// Config.Secrets the moment they are decoded — all values of a secret's data, not
// only the keys referenced. KV values that are JSON numbers or booleans are passed
// on as their JSON text; null, objects and arrays are ErrSecretMissing.
//
// Env pinning. KV paths are built by SecretPath from the Client's own env id; a
// reference cannot name another env or leave the env's root. The server side pins
// the token as well (the see-env policy), so a token of another env gets 403,
// ErrSecretDenied. A login whose token carries another env_id in its metadata is
// not refused here: TokenInfo.EnvID reports it and monky-tenancy answers
// AGENT_ENV_MISMATCH to that bearer.
//
// Token shapes. A login answer must be a plain service token: wrapped answers,
// AppRole fields (role_id, secret_id, role_name), no client token, num_uses > 0 or a
// token_type other than "service" (a batch token can be neither renewed nor
// revoked) are ErrLeaseShape. revoke-self of a token that OpenBao already rejects
// (403) succeeds: the token is unusable, which is what the caller asked for.
package bao
