// Package fakebao is a fake OpenBao for tests: a real HTTP server on 127.0.0.1 that
// answers the calls the on-box agent makes with OpenBao's shapes of record (docs/PROTOCOL.md),
// and enforces the same env pinning as the production see-env policy.
//
// What it serves:
//
//   - POST /v1/auth/<AuthMount>/login {"role","jwt"}: accepts a grant made by
//     MintGrant (HMAC-signed with a key of this server) for Options.Role; a wrong role,
//     a garbage, expired or missing JWT and a superseded grant (one minted before the
//     env's latest) are 400 {"errors":[…]}. The answer can be bent into the bad shapes
//     of SetLoginFault.
//   - GET /v1/auth/token/lookup-self, POST renew-self, POST revoke-self (204). An
//     invalid, expired or revoked token is 403 {"errors":["permission denied"]}.
//   - GET /v1/<KVMount>/data/<path>: KV v2 read. A token of env E may read only
//     <KVMount>/data/envs/E/*; any other path is 403 with OpenBao's multierror text. A
//     missing secret is 404 {"errors":[]}; a deleted or destroyed latest version is
//     404 with data null and its metadata, as OpenBao answers.
//   - PUT/POST /v1/<KVMount>/data/<path> {"data":{…}} writes a version and DELETE
//     soft-deletes the latest one, with the root token only (Options.RootToken,
//     default "root", as on an OpenBao dev server), so that a real vault/api client
//     can seed secrets.
//
// Grants expire 15 minutes after MintGrant. Tokens live Options.TokenTTL (SetTokenTTL
// changes it for tokens issued or renewed afterwards); renew-self extends a token to
// now + TTL with no maximum. Time comes from Options.Now, so tests can expire tokens
// without sleeping. SetSealed makes every request 503 {"errors":["Vault is sealed"]}.
//
// Every answer has exactly the keys a real OpenBao sends, with the same JSON kinds
// (auth.mfa_requirement is null on every login and renew-self; lookup-self has
// last_renewal_time and last_renewal once the token was renewed): see
// docs/PROTOCOL.md and TestShapesOfRecord.
//
// Requests lists every request (method, path, status, time) and never a token; the
// server's logger never sees one either.
package fakebao
