package fakebao

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/monky/monky-deployd/internal/fakes/loopback"
)

// Defaults of Options.
const (
	DefaultAuthMount = "jwt-tenancy"
	DefaultRole      = "see-env"
	DefaultKVMount   = "secret"
	DefaultTokenTTL  = time.Hour
	DefaultRootToken = "root"
	// GrantAudience is the aud claim of the grants MintGrant makes and login accepts.
	GrantAudience = "openbao"
	// GrantTTL is how long a minted grant is accepted.
	GrantTTL = 15 * time.Minute
)

// Login faults for SetLoginFault: the bad shapes of a login answer.
const (
	FaultNone       = ""
	FaultWrapped    = "wrapped"     // a response-wrapped answer (wrap_info, no auth)
	FaultAppRole    = "approle"     // an AppRole-shaped answer (role_name metadata, role_id data)
	FaultNoToken    = "no-token"    // an auth block with an empty client_token
	FaultLimitedUse = "limited-use" // a token with num_uses 3
)

// Options configure a Server. Zero values are the documented defaults.
type Options struct {
	// AuthMount is the JWT auth mount; "" means "jwt-tenancy".
	AuthMount string
	// Role is the only role login accepts; "" means "see-env".
	Role string
	// KVMount is the KV v2 mount; "" means "secret".
	KVMount string
	// TokenTTL is the TTL of issued and renewed tokens; 0 means 1h.
	TokenTTL time.Duration
	// NotRenewable issues tokens that renew-self refuses.
	NotRenewable bool
	// RootToken is the admin token that may write and delete any KV path; "" means
	// "root". It never expires.
	RootToken string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives a debug record per request; nil discards.
	Logger *slog.Logger
}

// Request is one request the server answered.
type Request struct {
	Method string
	Path   string
	Status int
	Time   time.Time
}

// Server is the fake OpenBao. Its methods are safe for concurrent use.
type Server struct {
	opts    Options
	key     []byte
	srv     *http.Server
	handler http.Handler
	url     string

	mu        sync.Mutex
	ttl       time.Duration
	sealed    bool
	fault     string
	grants    map[string]string // env → jti of the latest grant
	tokens    map[string]*token // token → record
	kv        map[string]*kvEntry
	requests  []Request
	entityIDs map[string]string
}

type token struct {
	env         string
	accessor    string
	entityID    string
	issued      time.Time
	expire      time.Time
	creationTTL time.Duration
	renewed     time.Time // the last renew-self; zero until then
	revoked     bool
}

type kvEntry struct {
	versions []*kvVersion
}

type kvVersion struct {
	data      map[string]any
	created   time.Time
	deleted   time.Time
	destroyed bool
}

// New starts a Server listening on 127.0.0.1:0 (plain HTTP). It panics if it cannot
// listen, as httptest.NewServer does; Start returns the error instead. Stop it with
// Close.
func New(opts Options) *Server { return loopback.Must(Start(opts)) }

// Start starts a Server listening on 127.0.0.1:0 (plain HTTP); stop it with Close. It
// fails when the loopback listener cannot be opened.
func Start(opts Options) (*Server, error) {
	loopback.Default(&opts.AuthMount, DefaultAuthMount)
	loopback.Default(&opts.Role, DefaultRole)
	loopback.Default(&opts.KVMount, DefaultKVMount)
	loopback.Default(&opts.TokenTTL, DefaultTokenTTL)
	loopback.Default(&opts.RootToken, DefaultRootToken)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:      opts,
		key:       randomBytes(32),
		ttl:       opts.TokenTTL,
		grants:    map[string]string{},
		tokens:    map[string]*token{},
		kv:        map[string]*kvEntry{},
		entityIDs: map[string]string{},
	}
	s.handler = http.HandlerFunc(s.serve)
	srv, ln, err := loopback.Serve(s.handler)
	if err != nil {
		return nil, fmt.Errorf("fakebao: listen on 127.0.0.1:0: %w", err)
	}
	s.srv, s.url = srv, "http://"+ln.Addr().String()
	return s, nil
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.url }

// Handler returns the server's API, to mount on another listener.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the server and closes its connections.
func (s *Server) Close() { _ = s.srv.Close() }

// RootToken returns the admin token that may write KV secrets.
func (s *Server) RootToken() string { return s.opts.RootToken }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("fakebao: crypto/rand: %v", err))
	}
	return b
}

func randomID() string {
	b := randomBytes(16)
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

var b64 = base64.RawURLEncoding

// grantClaims are the claims of a minted grant.
type grantClaims struct {
	Sub   string `json:"sub"`
	EnvID string `json:"env_id"`
	Aud   string `json:"aud"`
	JTI   string `json:"jti"`
	IAT   int64  `json:"iat"`
	EXP   int64  `json:"exp"`
}

// MintGrant returns a JWT-shaped deploy grant for envID (header.claims.signature,
// base64url, HS256 with a key of this server; claims sub, env_id, aud, jti, iat, exp).
// It supersedes every earlier grant of envID: login with one of those is refused.
func (s *Server) MintGrant(envID string) string {
	now := s.opts.Now()
	c := grantClaims{
		Sub:   "monky-agent:" + envID,
		EnvID: envID,
		Aud:   GrantAudience,
		JTI:   randomID(),
		IAT:   now.Unix(),
		EXP:   now.Add(GrantTTL).Unix(),
	}
	header := b64.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(c)
	signing := header + "." + b64.EncodeToString(claims)
	s.mu.Lock()
	s.grants[envID] = c.JTI
	s.mu.Unlock()
	return signing + "." + b64.EncodeToString(s.sign(signing))
}

func (s *Server) sign(signing string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(signing))
	return m.Sum(nil)
}

// TokenEnv returns the env of token if it is live (issued here, not expired, not
// revoked). The root token has no env.
func (s *Server) TokenEnv(tok string) (envID string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.liveToken(tok)
	if t == nil {
		return "", false
	}
	return t.env, true
}

// liveToken returns the record of a live token. s.mu must be held.
func (s *Server) liveToken(tok string) *token {
	t, ok := s.tokens[tok]
	if !ok || t.revoked || !s.opts.Now().Before(t.expire) {
		return nil
	}
	return t
}

func kvKey(envID, path string) string { return "envs/" + envID + "/" + path }

// PutSecret writes data as a new version of envID's secret at path (relative to the
// env root) and returns the version number.
func (s *Server) PutSecret(envID, path string, data map[string]string) int {
	m := make(map[string]any, len(data))
	for k, v := range data {
		m[k] = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.put(kvKey(envID, path), m)
}

func (s *Server) put(key string, data map[string]any) int {
	e := s.kv[key]
	if e == nil {
		e = &kvEntry{}
		s.kv[key] = e
	}
	e.versions = append(e.versions, &kvVersion{data: data, created: s.opts.Now()})
	return len(e.versions)
}

// DeleteSecret soft-deletes the latest version of envID's secret at path: reads then
// answer 404 with data null and the version's deletion_time.
func (s *Server) DeleteSecret(envID, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.softDelete(kvKey(envID, path))
}

func (s *Server) softDelete(key string) {
	if v, _ := s.latest(key); v != nil && v.deleted.IsZero() {
		v.deleted = s.opts.Now()
	}
}

// latest returns the latest version of the secret at key and its number; nil and 0
// when there is none. s.mu must be held.
func (s *Server) latest(key string) (*kvVersion, int) {
	e := s.kv[key]
	if e == nil || len(e.versions) == 0 {
		return nil, 0
	}
	return e.versions[len(e.versions)-1], len(e.versions)
}

// DestroySecret destroys the latest version of envID's secret at path: its data is
// gone and reads answer 404 with data null and destroyed true.
func (s *Server) DestroySecret(envID, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, _ := s.latest(kvKey(envID, path)); v != nil {
		v.destroyed, v.data = true, nil
	}
}

// SetSealed seals (every request answers 503 {"errors":["Vault is sealed"]}) or
// unseals the server.
func (s *Server) SetSealed(sealed bool) {
	s.mu.Lock()
	s.sealed = sealed
	s.mu.Unlock()
}

// SetLoginFault makes later logins answer one of the bad shapes (FaultWrapped,
// FaultAppRole, FaultNoToken, FaultLimitedUse); FaultNone restores good answers. An
// unknown fault panics.
func (s *Server) SetLoginFault(f string) {
	switch f {
	case FaultNone, FaultWrapped, FaultAppRole, FaultNoToken, FaultLimitedUse:
	default:
		panic(fmt.Sprintf("fakebao: unknown login fault %q", f))
	}
	s.mu.Lock()
	s.fault = f
	s.mu.Unlock()
}

// SetTokenTTL sets the TTL of tokens issued or renewed from now on.
func (s *Server) SetTokenTTL(d time.Duration) {
	s.mu.Lock()
	s.ttl = d
	s.mu.Unlock()
}

// InvalidateTokens revokes every token of envID: they get 403 permission denied.
func (s *Server) InvalidateTokens(envID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		if t.env == envID {
			t.revoked = true
		}
	}
}

// Requests returns a copy of every request answered so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// statusWriter records the status a handler wrote; 0 until it writes one (a body
// written first is 200).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// The clock is read before the answer is written: a test that moves its clock
	// after the answer does not race with the record.
	now := s.opts.Now()
	sw := &statusWriter{ResponseWriter: w}
	s.route(sw, r)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Status: sw.status, Time: now})
	s.mu.Unlock()
	s.opts.Logger.Debug("fakebao request", "method", r.Method, "path", r.URL.Path, "status", sw.status)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErrors(w http.ResponseWriter, status int, msgs ...string) {
	if msgs == nil {
		msgs = []string{}
	}
	writeJSON(w, status, map[string]any{"errors": msgs})
}

// permissionDenied is the answer to an invalid token.
func permissionDenied(w http.ResponseWriter) {
	writeErrors(w, http.StatusForbidden, "permission denied")
}

// policyDenied is the answer to a valid token on a path its policy does not cover.
func policyDenied(w http.ResponseWriter) {
	writeErrors(w, http.StatusForbidden, "1 error occurred:\n\t* permission denied\n\n")
}

func requestToken(r *http.Request) string {
	if t := r.Header.Get("X-Vault-Token"); t != "" {
		return t
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return a
	}
	return ""
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sealed := s.sealed
	s.mu.Unlock()
	if sealed {
		writeErrors(w, http.StatusServiceUnavailable, "Vault is sealed")
		return
	}
	p, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		writeErrors(w, http.StatusNotFound)
		return
	}
	switch {
	case p == "auth/"+s.opts.AuthMount+"/login":
		serveMethods(w, r, s.login, http.MethodPost, http.MethodPut)
	case p == "auth/token/lookup-self":
		serveMethods(w, r, s.self(s.lookupSelf), http.MethodGet, http.MethodPost)
	case p == "auth/token/renew-self":
		serveMethods(w, r, s.self(s.renewSelf), http.MethodPost, http.MethodPut)
	case p == "auth/token/revoke-self":
		serveMethods(w, r, s.self(s.revokeSelf), http.MethodPost, http.MethodPut)
	case strings.HasPrefix(p, s.opts.KVMount+"/data/"):
		s.kvData(w, r, strings.TrimPrefix(p, s.opts.KVMount+"/data/"))
	default:
		if requestToken(r) == "" {
			permissionDenied(w)
			return
		}
		writeErrors(w, http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.", p))
	}
}

// serveMethods serves r with h when its method is one of methods (the verbs OpenBao
// takes on the route), and answers as OpenBao does to any other.
func serveMethods(w http.ResponseWriter, r *http.Request, h http.HandlerFunc, methods ...string) {
	if !slices.Contains(methods, r.Method) {
		unsupported(w)
		return
	}
	h(w, r)
}

func unsupported(w http.ResponseWriter) {
	writeErrors(w, http.StatusMethodNotAllowed, "1 error occurred:\n\t* unsupported operation\n\n")
}

// checkGrant validates a grant and returns its env, or the error message of a 400.
// s.mu must be held.
func (s *Server) checkGrant(jwt string) (string, string) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "", "error validating token: invalid JWT: expected 3 parts"
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, s.sign(parts[0]+"."+parts[1])) {
		return "", "error validating token: failed to verify id token signature"
	}
	raw, err := b64.DecodeString(parts[1])
	if err != nil {
		return "", "error validating token: malformed claims"
	}
	var c grantClaims
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", "error validating token: malformed claims"
	}
	now := s.opts.Now().Unix()
	switch {
	case c.Aud != GrantAudience:
		return "", "error validating claims: invalid audience (aud) claim: audience claim does not match any expected audience"
	case c.EXP <= now:
		return "", "error validating claims: validation failed, token is expired (exp)"
	case c.EnvID == "":
		return "", `error validating claims: claim "env_id" not found in token`
	case s.grants[c.EnvID] != c.JTI:
		return "", "error validating claims: grant superseded by a newer lease of " + c.EnvID
	}
	return c.EnvID, ""
}

func (s *Server) entityID(env string) string {
	id, ok := s.entityIDs[env]
	if !ok {
		id = randomID()
		s.entityIDs[env] = id
	}
	return id
}

// issue creates a live token of env. s.mu must be held.
func (s *Server) issue(env string) (string, *token) {
	now := s.opts.Now()
	tok := "s." + b64.EncodeToString(randomBytes(18))
	t := &token{
		env:         env,
		accessor:    b64.EncodeToString(randomBytes(18)),
		entityID:    s.entityID(env),
		issued:      now,
		expire:      now.Add(s.ttl),
		creationTTL: s.ttl,
	}
	s.tokens[tok] = t
	return tok, t
}

func (s *Server) policies() []string { return []string{"default", s.opts.Role} }

func (s *Server) authBlock(tok string, t *token, leaseDuration time.Duration) map[string]any {
	return map[string]any{
		"client_token":   tok,
		"accessor":       t.accessor,
		"policies":       s.policies(),
		"token_policies": s.policies(),
		"metadata":       map[string]string{"role": s.opts.Role, "env_id": t.env},
		"lease_duration": int64(leaseDuration / time.Second),
		"renewable":      !s.opts.NotRenewable,
		"entity_id":      t.entityID,
		"token_type":     "service",
		"orphan":         true,
		// OpenBao's HTTPAuth sends mfa_requirement on every login and renew: null
		// when no MFA applies (sdk/logical translate_response.go).
		"mfa_requirement": nil,
		"num_uses":        0,
	}
}

func envelope(auth any, wrap any, data any) map[string]any {
	return map[string]any{
		"request_id":     randomID(),
		"lease_id":       "",
		"renewable":      false,
		"lease_duration": 0,
		"data":           data,
		"wrap_info":      wrap,
		"warnings":       nil,
		"auth":           auth,
	}
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Role string `json:"role"`
		JWT  string `json:"jwt"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		writeErrors(w, http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case body.Role == "":
		writeErrors(w, http.StatusBadRequest, "missing role")
		return
	case body.Role != s.opts.Role:
		writeErrors(w, http.StatusBadRequest, fmt.Sprintf("role %q could not be found", body.Role))
		return
	case body.JWT == "":
		writeErrors(w, http.StatusBadRequest, "missing token")
		return
	}
	env, msg := s.checkGrant(body.JWT)
	if msg != "" {
		writeErrors(w, http.StatusBadRequest, msg)
		return
	}
	if s.fault == FaultWrapped {
		writeJSON(w, http.StatusOK, envelope(nil, map[string]any{
			"token":            "s." + b64.EncodeToString(randomBytes(18)),
			"accessor":         b64.EncodeToString(randomBytes(18)),
			"ttl":              300,
			"creation_time":    s.opts.Now().UTC().Format(time.RFC3339Nano),
			"creation_path":    "auth/" + s.opts.AuthMount + "/login",
			"wrapped_accessor": b64.EncodeToString(randomBytes(18)),
		}, nil))
		return
	}
	tok, t := s.issue(env)
	a := s.authBlock(tok, t, s.ttl)
	var data any
	switch s.fault {
	case FaultAppRole:
		a["metadata"] = map[string]string{"role_name": s.opts.Role}
		data = map[string]any{"role_id": randomID()}
	case FaultNoToken:
		a["client_token"] = ""
	case FaultLimitedUse:
		a["num_uses"] = 3
	}
	writeJSON(w, http.StatusOK, envelope(a, nil, data))
}

// self serves a call on the request's own token under s.mu: h runs with the token
// and its record when the token is live; otherwise the answer is 403.
func (s *Server) self(h func(w http.ResponseWriter, tok string, t *token)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		tok := requestToken(r)
		t := s.liveToken(tok)
		if t == nil {
			permissionDenied(w)
			return
		}
		h(w, tok, t)
	}
}

func (s *Server) lookupSelf(w http.ResponseWriter, tok string, t *token) {
	now := s.opts.Now()
	data := map[string]any{
		"accessor":         t.accessor,
		"creation_time":    t.issued.Unix(),
		"creation_ttl":     int64(t.creationTTL / time.Second),
		"display_name":     s.opts.AuthMount + "-monky-agent:" + t.env,
		"entity_id":        t.entityID,
		"expire_time":      t.expire.UTC().Format(time.RFC3339Nano),
		"explicit_max_ttl": 0,
		"id":               tok,
		"issue_time":       t.issued.UTC().Format(time.RFC3339Nano),
		"meta":             map[string]string{"role": s.opts.Role, "env_id": t.env},
		"num_uses":         0,
		"orphan":           true,
		"path":             "auth/" + s.opts.AuthMount + "/login",
		"policies":         s.policies(),
		"renewable":        !s.opts.NotRenewable,
		"ttl":              int64(t.expire.Sub(now) / time.Second),
		"type":             "service",
	}
	if !t.renewed.IsZero() {
		// As OpenBao's handleLookup: both keys appear once the token was renewed.
		data["last_renewal_time"] = t.renewed.Unix()
		data["last_renewal"] = t.renewed.UTC().Format(time.RFC3339Nano)
	}
	writeJSON(w, http.StatusOK, envelope(nil, nil, data))
}

func (s *Server) renewSelf(w http.ResponseWriter, tok string, t *token) {
	if s.opts.NotRenewable {
		writeErrors(w, http.StatusBadRequest, "lease is not renewable")
		return
	}
	t.renewed = s.opts.Now()
	t.expire = t.renewed.Add(s.ttl)
	writeJSON(w, http.StatusOK, envelope(s.authBlock(tok, t, s.ttl), nil, nil))
}

func (s *Server) revokeSelf(w http.ResponseWriter, _ string, t *token) {
	t.revoked = true
	w.WriteHeader(http.StatusNoContent)
}

// safeKVPath reports whether a KV path has no empty, "." or ".." segment.
func safeKVPath(p string) bool {
	if p == "" {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func (s *Server) kvData(w http.ResponseWriter, r *http.Request, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := requestToken(r)
	root := tok == s.opts.RootToken
	var t *token
	if !root {
		if t = s.liveToken(tok); t == nil {
			permissionDenied(w)
			return
		}
	}
	switch r.Method {
	case http.MethodGet:
		// The see-env policy: read on <kv>/data/envs/<env>/* and nothing else.
		if !root && (!strings.HasPrefix(p, "envs/"+t.env+"/") || !safeKVPath(p)) {
			policyDenied(w)
			return
		}
		s.kvRead(w, p)
	case http.MethodPut, http.MethodPost:
		if !root || !safeKVPath(p) {
			policyDenied(w)
			return
		}
		var body struct {
			Data map[string]any `json:"data"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || body.Data == nil {
			writeErrors(w, http.StatusBadRequest, "no data provided")
			return
		}
		v := s.put(p, body.Data)
		writeJSON(w, http.StatusOK, envelope(nil, nil, s.versionMeta(s.kv[p].versions[v-1], v)))
	case http.MethodDelete:
		if !root || !safeKVPath(p) {
			policyDenied(w)
			return
		}
		s.softDelete(p)
		w.WriteHeader(http.StatusNoContent)
	default:
		unsupported(w)
	}
}

func (s *Server) versionMeta(v *kvVersion, n int) map[string]any {
	deletion := ""
	if !v.deleted.IsZero() {
		deletion = v.deleted.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"created_time":    v.created.UTC().Format(time.RFC3339Nano),
		"custom_metadata": nil,
		"deletion_time":   deletion,
		"destroyed":       v.destroyed,
		"version":         n,
	}
}

// kvRead answers the latest version of the secret at p: 404 errors [] when there is
// none, 404 with data null when it is deleted or destroyed.
func (s *Server) kvRead(w http.ResponseWriter, p string) {
	v, n := s.latest(p)
	if v == nil {
		writeErrors(w, http.StatusNotFound)
		return
	}
	status, data := http.StatusOK, v.data
	if v.destroyed || !v.deleted.IsZero() {
		status, data = http.StatusNotFound, nil
	}
	writeJSON(w, status, envelope(nil, nil, map[string]any{"data": data, "metadata": s.versionMeta(v, n)}))
}
