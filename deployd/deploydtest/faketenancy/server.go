package faketenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/internal/fakes/loopback"
)

// Authority judges bearers and mints deploy grants. The fake OpenBao implements it.
type Authority interface {
	// MintGrant returns a new deploy grant for envID; it supersedes the env's earlier
	// grants.
	MintGrant(envID string) string
	// TokenEnv returns the environment of a live token.
	TokenEnv(token string) (envID string, ok bool)
}

// Options configures a Server. Zero values are the documented defaults.
type Options struct {
	// Authority judges bearers and mints grants (required).
	Authority Authority
	// LeaseBudget is the number of leases per environment in LeaseWindow; default 5.
	LeaseBudget int
	// LeaseWindow is the rolling window of the budget; default 1h.
	LeaseWindow time.Duration
	// LeaseTTL is how far in the future a lease's expires_at is; default 10m.
	LeaseTTL time.Duration
	// AuthMount and Role are named in every lease; defaults "jwt-tenancy", "see-env".
	AuthMount, Role string
	// NextCheckin is next_checkin_s of every check-in answer; default 60s.
	NextCheckin time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives one debug line per request (never the bearer); nil discards.
	Logger *slog.Logger
}

// Desired is the state an environment's check-in answers.
type Desired struct {
	// Action is "apply", "none" or "down" ("" is "none").
	Action string `json:"action"`
	// SHA and Serial go with apply; Serial 0 takes the serial the sha was published with.
	SHA string `json:"sha,omitempty"`
	// Serial of the bundle; 0 with apply takes the serial the sha was published with.
	Serial int64 `json:"serial,omitempty"`
	// Purge goes with down.
	Purge bool `json:"purge,omitempty"`
	// Retry goes with apply: retry a sha that failed on the box.
	Retry bool `json:"retry,omitempty"`
	// Rollback goes with apply: allow a lower serial.
	Rollback bool `json:"rollback,omitempty"`
	// OverrideHold goes with apply: apply although a person at the box set a hold
	// (override_hold; it does not open a closed window).
	OverrideHold bool `json:"override_hold,omitempty"`
}

// Faults are misbehaviours on demand. The zero Faults is a well-behaved server.
type Faults struct {
	// LeaseShape makes leases answer an AppRole ("approle") or response-wrapped
	// ("wrapped") shape instead of a grant; "" is the right shape.
	LeaseShape string `json:"lease_shape,omitempty"`
	// Status forces an HTTP status on a call: keys "checkin", "bundle", "signature",
	// "lease", "report".
	Status map[string]int `json:"status,omitempty"`
	// RetryAfter is sent with a forced 429 or 503; default 30s with 429.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// LeaseBudget overrides Options.LeaseBudget when > 0.
	LeaseBudget int `json:"lease_budget,omitempty"`
	// EchoBearer makes every error message quote the request's bearer, as a leaky
	// server would; clients must not pass it on.
	EchoBearer bool `json:"echo_bearer,omitempty"`
	// Delay holds each call (keys as Status) this long before answering, or until the
	// client gives up.
	Delay map[string]time.Duration `json:"delay,omitempty"`
	// TruncateBundle makes a bundle download announce its full length and stop half way.
	TruncateBundle bool `json:"truncate_bundle,omitempty"`
}

// Request is one request as the server saw it; never the bearer.
type Request struct {
	// Method and Path of the request.
	Method string `json:"method"`
	Path   string `json:"path"`
	// EnvID is the environment of the bearer, "" when it was not a live token.
	EnvID string `json:"env_id"`
	// Status is the answer's status (499 when the client gave up during a Delay).
	Status int `json:"status"`
	// Time is when the request arrived.
	Time time.Time `json:"time"`
}

// Host is the host part of a check-in.
type Host struct {
	// Hostname, DockerVersion and FreeMB as the agent sent them.
	Hostname      string `json:"hostname"`
	DockerVersion string `json:"docker_version"`
	FreeMB        int64  `json:"free_mb"`
}

// CheckinRequest is a check-in as received.
type CheckinRequest struct {
	// EnvID … Host are the body's fields (docs/PROTOCOL.md).
	EnvID         string `json:"env_id"`
	AgentVersion  string `json:"agent_version"`
	CurrentSHA    string `json:"current_sha"`
	CurrentSerial int64  `json:"current_serial"`
	LastResult    string `json:"last_result"`
	LastCode      string `json:"last_code"`
	Host          Host   `json:"host"`
	// Live is the check-in's live object; nil when it carried none (nothing is live).
	Live *Live `json:"live,omitempty"`
	// Condition is the check-in's condition object; nil when it carried none (the
	// box's last run ended 0).
	Condition *Condition `json:"condition,omitempty"`
	// Deferred is the check-in's deferred object; nil when it carried none (nothing
	// waits on the box).
	Deferred *Deferred `json:"deferred,omitempty"`
	// UserAgent is the request's User-Agent header.
	UserAgent string `json:"user_agent"`
	// Time is when the check-in arrived.
	Time time.Time `json:"time"`
}

// ServiceState is one service of a report.
type ServiceState struct {
	// Name, State and Health of the compose service.
	Name   string `json:"name"`
	State  string `json:"state"`
	Health string `json:"health"`
}

// Report is a report as received.
type Report struct {
	// EnvID … DurationMS are the body's fields (docs/PROTOCOL.md).
	EnvID      string         `json:"env_id"`
	SHA        string         `json:"sha"`
	Serial     int64          `json:"serial"`
	Result     string         `json:"result"`
	Code       string         `json:"code"`
	Detail     string         `json:"detail"`
	Tail       string         `json:"tail"`
	Services   []ServiceState `json:"services"`
	DurationMS int64          `json:"duration_ms"`
	// Time is when the report arrived.
	Time time.Time `json:"time"`
}

// Lease is a lease the server granted (the grant itself is not kept).
type Lease struct {
	// EnvID and SHA the lease was granted for.
	EnvID string `json:"env_id"`
	SHA   string `json:"sha"`
	// Time it was granted, and ExpiresAt as answered.
	Time      time.Time `json:"time"`
	ExpiresAt time.Time `json:"expires_at"`
	// RequestID is the request's request_id, "" when it had none.
	RequestID string `json:"request_id,omitempty"`
}

// answered is the last lease granted to an environment under a request id, with its
// grant, so that the same request sent again is answered with the same lease.
type answered struct {
	lease Lease
	grant string
}

type published struct {
	envID  string
	serial int64
	data   []byte
	// sig is the signature file published with the bundle; nil when none is.
	sig []byte
}

type envState struct {
	desired    Desired
	lastSerial int64
	checkins   []CheckinRequest
	reports    []Report
	leases     []Lease
	// last is the last lease granted under a request id; nil when none was.
	last *answered
}

// Server is the fake tenancy. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	log  *slog.Logger
	ln   net.Listener
	srv  *http.Server
	mux  *http.ServeMux

	mu       sync.Mutex
	faults   Faults
	envs     map[string]*envState
	bundles  map[string]*published
	requests []Request
	changed  chan struct{}
	delayed  int // calls held by a Delay fault right now
}

// Delayed is how many calls a Delay fault holds right now: a test waits for it before
// it stops or cancels the client it holds.
func (s *Server) Delayed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delayed
}

// New starts a Server on 127.0.0.1:0. It panics when opts.Authority is nil or the
// loopback listener cannot be opened, like net/http/httptest; Start returns the
// listener's error instead.
func New(opts Options) *Server { return loopback.Must(Start(opts)) }

// Start starts a Server on 127.0.0.1:0; stop it with Close. It panics when
// opts.Authority is nil (a programming error) and fails when the loopback listener
// cannot be opened.
func Start(opts Options) (*Server, error) {
	s := NewUnstarted(opts)
	var err error
	if s.srv, s.ln, err = loopback.Serve(s.Handler()); err != nil {
		return nil, fmt.Errorf("faketenancy: listen on loopback: %w", err)
	}
	return s, nil
}

// NewUnstarted returns a Server that does not listen: serve Handler yourself.
func NewUnstarted(opts Options) *Server {
	if opts.Authority == nil {
		panic("faketenancy: Options.Authority is required")
	}
	loopback.Default(&opts.LeaseBudget, 5)
	loopback.Default(&opts.LeaseWindow, time.Hour)
	loopback.Default(&opts.LeaseTTL, 10*time.Minute)
	loopback.Default(&opts.AuthMount, "jwt-tenancy")
	loopback.Default(&opts.Role, "see-env")
	loopback.Default(&opts.NextCheckin, time.Minute)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger,
		envs:    map[string]*envState{},
		bundles: map[string]*published{},
		changed: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agent/checkin", s.wrap("checkin", s.handleCheckin))
	mux.HandleFunc("GET /v1/agent/bundles/{sha}", s.wrap("bundle", s.handleBundle))
	mux.HandleFunc("GET /v1/agent/bundles/{sha}/signature", s.wrap("signature", s.handleSignature))
	mux.HandleFunc("POST /v1/agent/lease", s.wrap("lease", s.handleLease))
	mux.HandleFunc("POST /v1/agent/report", s.wrap("report", s.handleReport))
	mux.HandleFunc("/", s.wrap("", func(w http.ResponseWriter, r *http.Request, rec *Request, _ string) {
		writeError(w, rec, http.StatusNotFound, "NOT_FOUND", "no such agent call")
	}))
	s.mux = mux
	return s
}

// URL returns the base URL, http://127.0.0.1:<port>. It is "" for an unstarted Server.
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Handler returns the agent API handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the listener and closes open connections.
func (s *Server) Close() {
	if s.srv != nil {
		_ = s.srv.Close()
	}
}

// PublishBundle stores a bundle (tar or tar.gz) for envID. It returns the bundle sha
// (computed by SHA, the fake's own code) and the new serial, the env's last + 1, and
// makes the desired state apply it. It fails when SHA does, or when the same bundle is
// already published for another environment.
func (s *Server) PublishBundle(envID string, data []byte) (sha string, serial int64, err error) {
	if envID == "" {
		return "", 0, errors.New("faketenancy: publish: env_id is required")
	}
	sha, err = SHA(bytes.NewReader(data))
	if err != nil {
		return "", 0, fmt.Errorf("faketenancy: publish for %s: %w", envID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.env(envID)
	if b, ok := s.bundles[sha]; ok && b.envID == envID {
		serial = b.serial
	} else {
		if ok {
			return "", 0, fmt.Errorf("faketenancy: publish for %s: bundle %s is already published for %s", envID, sha, b.envID)
		}
		e.lastSerial++
		serial = e.lastSerial
		s.bundles[sha] = &published{envID: envID, serial: serial, data: append([]byte(nil), data...)}
	}
	e.desired = Desired{Action: "apply", SHA: sha, Serial: serial}
	return sha, serial, nil
}

// PublishSignature stores sig, byte for byte, as the signature of the bundle sha
// published for envID (GET /v1/agent/bundles/<sha>/signature serves it); it replaces
// an earlier one. The fake does not check it, as tenancy does not: an empty or
// malformed sig is served as it is. It fails when sha is not published for envID.
func (s *Server) PublishSignature(envID, sha string, sig []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bundles[sha]
	if !ok || b.envID != envID {
		return fmt.Errorf("faketenancy: publish signature for %s: bundle %s is not published for it", envID, sha)
	}
	b.sig = append([]byte{}, sig...)
	return nil
}

// SetDesired sets what envID's check-ins answer.
func (s *Server) SetDesired(envID string, d Desired) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Action == "apply" && d.Serial == 0 {
		if b, ok := s.bundles[d.SHA]; ok && b.envID == envID {
			d.Serial = b.serial
		}
	}
	s.env(envID).desired = d
}

// SetFaults replaces the faults. The maps are copied: changing them afterwards has no
// effect.
func (s *Server) SetFaults(f Faults) {
	f.Status = maps.Clone(f.Status)
	f.Delay = maps.Clone(f.Delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// Faults returns the current faults.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// Reports returns envID's reports, oldest first.
func (s *Server) Reports(envID string) []Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Report(nil), s.env(envID).reports...)
}

// Checkins returns envID's check-ins, oldest first.
func (s *Server) Checkins(envID string) []CheckinRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]CheckinRequest(nil), s.env(envID).checkins...)
	for i := range out {
		out[i].Live = out[i].Live.clone()
		out[i].Condition = clonePtr(out[i].Condition)
		out[i].Deferred = clonePtr(out[i].Deferred)
	}
	return out
}

// LastCondition returns the condition object of envID's latest check-in. It is false
// when there was no check-in or the latest carried none: the box's last run ended 0.
func (s *Server) LastCondition(envID string) (Condition, bool) {
	return latest(s, envID, func(c *CheckinRequest) *Condition { return c.Condition })
}

// LastLive returns the live object of envID's latest check-in. It is false when there
// was no check-in or the latest carried no live object: the box said nothing is live.
func (s *Server) LastLive(envID string) (Live, bool) {
	return latest(s, envID, func(c *CheckinRequest) *Live { return c.Live.clone() })
}

// LastDeferred returns the deferred object of envID's latest check-in. It is false
// when there was no check-in or the latest carried none: nothing waits on the box.
func (s *Server) LastDeferred(envID string) (Deferred, bool) {
	return latest(s, envID, func(c *CheckinRequest) *Deferred { return c.Deferred })
}

// latest returns the object that of picks (a copy of it) from envID's latest
// check-in; false when there was no check-in or of picks nil.
func latest[T any](s *Server, envID string, of func(*CheckinRequest) *T) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var v *T
	if cs := s.env(envID).checkins; len(cs) > 0 {
		v = of(&cs[len(cs)-1])
	}
	if v == nil {
		var zero T
		return zero, false
	}
	return *v, true
}

// Leases returns the leases granted to envID, oldest first.
func (s *Server) Leases(envID string) []Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Lease(nil), s.env(envID).leases...)
}

// Requests returns every request, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// WaitReport waits until envID has n reports (n ≥ 1) and returns the n-th.
func (s *Server) WaitReport(ctx context.Context, envID string, n int) (Report, error) {
	if n < 1 {
		return Report{}, fmt.Errorf("faketenancy: WaitReport: n must be ≥ 1, got %d", n)
	}
	for {
		s.mu.Lock()
		reports := s.env(envID).reports
		ch := s.changed
		if len(reports) >= n {
			r := reports[n-1]
			s.mu.Unlock()
			return r, nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return Report{}, fmt.Errorf("faketenancy: waiting for report %d of %s: %w", n, envID, ctx.Err())
		case <-ch:
		}
	}
}

// env returns envID's state; s.mu must be held.
func (s *Server) env(envID string) *envState {
	e, ok := s.envs[envID]
	if !ok {
		e = &envState{}
		s.envs[envID] = e
	}
	return e
}

// handlerFunc handles an authenticated call: tokenEnv is the bearer's environment.
type handlerFunc func(w http.ResponseWriter, r *http.Request, rec *Request, tokenEnv string)

// maxHeldBody bounds what hold reads ahead of a body (the agent's calls send a few
// KiB); the rest of a larger one is still read by the handler.
const maxHeldBody = 1 << 20

// hold holds the call r for d, and reports false when the client gave up first. It
// reads the body first (and puts it back for the handler): net/http learns that the
// client closed its connection only once the request body has been read.
func (s *Server) hold(r *http.Request, d time.Duration) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxHeldBody))
	if err != nil {
		return false
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	s.mu.Lock()
	s.delayed++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.delayed--
		s.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// wrap records the request, applies forced faults and authenticates the bearer.
func (s *Server) wrap(call string, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &Request{Method: r.Method, Path: r.URL.Path, Time: s.opts.Now()}
		defer func() {
			s.mu.Lock()
			s.requests = append(s.requests, *rec)
			s.mu.Unlock()
			s.log.Debug("faketenancy request", "method", rec.Method, "path", rec.Path, "env_id", rec.EnvID, "status", rec.Status)
		}()
		f := s.Faults()
		bearer, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if f.EchoBearer {
			w = &echoWriter{ResponseWriter: w, bearer: bearer}
		}
		if d := f.Delay[call]; d > 0 && !s.hold(r, d) {
			rec.Status = 499
			return
		}
		if st := f.Status[call]; st != 0 {
			s.forced(w, rec, st, f.RetryAfter)
			return
		}
		envID, ok := "", false
		if hasBearer && bearer != "" {
			envID, ok = s.opts.Authority.TokenEnv(bearer)
		}
		if !ok {
			writeError(w, rec, http.StatusUnauthorized, string(codes.Unauthenticated), "the bearer is not a live token")
			return
		}
		rec.EnvID = envID
		h(w, r, rec, envID)
	}
}

// forced answers a status forced by Faults.Status.
func (s *Server) forced(w http.ResponseWriter, rec *Request, status int, retryAfter time.Duration) {
	code := "FAULT"
	switch {
	case status == http.StatusUnauthorized:
		code = string(codes.Unauthenticated)
	case status == http.StatusConflict, status == http.StatusForbidden:
		code = string(codes.AgentEnvMismatch)
	case status == http.StatusTooManyRequests:
		code = string(codes.RateLimited)
		if retryAfter <= 0 {
			retryAfter = 30 * time.Second
		}
	case status >= 500:
		code = string(codes.Unavailable)
	}
	if retryAfter > 0 && (status == http.StatusTooManyRequests || status >= 500) {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
	}
	writeError(w, rec, status, code, "forced by the fake's faults")
}

// namesOwnEnv answers 400 when a call names no environment, and 409 as sameEnv does
// when it names another than its bearer token's.
func namesOwnEnv(w http.ResponseWriter, rec *Request, call, envID, tokenEnv string) bool {
	if envID == "" {
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", "env_id is required")
		return false
	}
	return sameEnv(w, rec, call, envID, tokenEnv)
}

// sameEnv answers 409 AGENT_ENV_MISMATCH, as tenancy does, when a call names another
// environment than its bearer token's.
func sameEnv(w http.ResponseWriter, rec *Request, call, envID, tokenEnv string) bool {
	if envID == tokenEnv {
		return true
	}
	writeError(w, rec, http.StatusConflict, string(codes.AgentEnvMismatch), fmt.Sprintf("the token belongs to %s, the %s names %s", tokenEnv, call, envID))
	return false
}

// checkinWire is a check-in body as it arrives: live is decoded on its own, strict
// about what it knows and tolerant of fields it does not (parseLive).
type checkinWire struct {
	CheckinRequest
	Live      json.RawMessage `json:"live"`
	Condition json.RawMessage `json:"condition"`
	Deferred  json.RawMessage `json:"deferred"`
}

func (s *Server) handleCheckin(w http.ResponseWriter, r *http.Request, rec *Request, tokenEnv string) {
	var body checkinWire
	if !decodeBody(w, r, rec, &body) {
		return
	}
	req := body.CheckinRequest
	if !namesOwnEnv(w, rec, "check-in", req.EnvID, tokenEnv) {
		return
	}
	switch req.LastResult {
	case "", "applied", "failed", "down":
	default:
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", "last_result must be applied, failed or down")
		return
	}
	var err error
	if req.Live, err = parseLive(body.Live); err == nil {
		if req.Condition, err = parseCondition(body.Condition); err == nil {
			req.Deferred, err = parseDeferred(body.Deferred)
		}
	}
	if err != nil {
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	req.UserAgent = r.Header.Get("User-Agent")
	req.Time = s.opts.Now()
	s.mu.Lock()
	e := s.env(tokenEnv)
	e.checkins = append(e.checkins, req)
	d := e.desired
	s.mu.Unlock()

	resp := checkinResponse{Action: "none", NextCheckinS: int64(s.opts.NextCheckin / time.Second)}
	switch d.Action {
	case "apply":
		resp.Action, resp.SHA, resp.Serial, resp.Retry, resp.Rollback = "apply", d.SHA, d.Serial, d.Retry, d.Rollback
		resp.OverrideHold = d.OverrideHold
	case "down":
		resp.Action, resp.Purge = "down", d.Purge
	}
	writeJSON(w, rec, http.StatusOK, resp)
}

// checkinResponse is the check-in answer on the wire.
type checkinResponse struct {
	Action       string `json:"action"`
	SHA          string `json:"sha,omitempty"`
	Serial       int64  `json:"serial,omitempty"`
	Purge        bool   `json:"purge"`
	Retry        bool   `json:"retry"`
	Rollback     bool   `json:"rollback"`
	NextCheckinS int64  `json:"next_checkin_s"`
	OverrideHold bool   `json:"override_hold,omitempty"`
}

// envBundle answers what the bundle and the signature calls refuse alike: 400 for a
// path that names no sha, 404 for a bundle never published, 409 for one of another env
// than the bearer's. Otherwise it returns the bundle as it is now.
func (s *Server) envBundle(w http.ResponseWriter, r *http.Request, rec *Request, tokenEnv string) (published, bool) {
	sha := r.PathValue("sha")
	if !ids.ValidSHA(sha) {
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", "the sha is not 64 lowercase hex")
		return published{}, false
	}
	s.mu.Lock()
	b, ok := s.bundles[sha]
	var pub published
	if ok {
		pub = *b
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, rec, http.StatusNotFound, "BUNDLE_NOT_FOUND", "no bundle "+sha)
		return published{}, false
	}
	if pub.envID != tokenEnv {
		writeError(w, rec, http.StatusConflict, string(codes.AgentEnvMismatch), fmt.Sprintf("bundle %s is not published for %s", sha, tokenEnv))
		return published{}, false
	}
	return pub, true
}

func (s *Server) handleBundle(w http.ResponseWriter, r *http.Request, rec *Request, tokenEnv string) {
	b, ok := s.envBundle(w, r, rec, tokenEnv)
	if !ok {
		return
	}
	s.mu.Lock()
	truncate := s.faults.TruncateBundle
	s.mu.Unlock()
	ct := "application/x-tar"
	if len(b.data) >= 2 && b.data[0] == 0x1f && b.data[1] == 0x8b {
		ct = "application/gzip"
	}
	if !truncate {
		writeBytes(w, rec, ct, len(b.data), b.data)
		return
	}
	writeBytes(w, rec, ct, len(b.data), b.data[:len(b.data)/2])
	if conn, buf, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = buf.Flush()
		_ = conn.Close()
	}
}

// writeBytes answers 200 announcing length bytes of the content type ct, and writes
// body.
func writeBytes(w http.ResponseWriter, rec *Request, ct string, length int, body []byte) {
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(length))
	w.WriteHeader(http.StatusOK)
	rec.Status = http.StatusOK
	_, _ = w.Write(body)
}

// handleSignature serves the signature published with a bundle: 404 when none is,
// and, for a sha that is not the env's, the bundle call's answers (404, 409).
func (s *Server) handleSignature(w http.ResponseWriter, r *http.Request, rec *Request, tokenEnv string) {
	b, ok := s.envBundle(w, r, rec, tokenEnv)
	if !ok {
		return
	}
	sig := b.sig
	if sig == nil {
		writeError(w, rec, http.StatusNotFound, "SIGNATURE_NOT_FOUND", "no signature is published for bundle "+r.PathValue("sha"))
		return
	}
	writeBytes(w, rec, "text/plain; charset=utf-8", len(sig), sig)
}

type leaseRequest struct {
	EnvID     string `json:"env_id"`
	SHA       string `json:"sha"`
	RequestID string `json:"request_id"`
}

func (s *Server) handleLease(w http.ResponseWriter, r *http.Request, rec *Request, tokenEnv string) {
	var req leaseRequest
	if !decodeBody(w, r, rec, &req) {
		return
	}
	if req.EnvID == "" || !ids.ValidSHA(req.SHA) {
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", "env_id and a 64 lowercase hex sha are required")
		return
	}
	if !sameEnv(w, rec, "lease", req.EnvID, tokenEnv) {
		return
	}
	now := s.opts.Now()
	s.mu.Lock()
	b, ok := s.bundles[req.SHA]
	if !ok || b.envID != tokenEnv {
		s.mu.Unlock()
		writeError(w, rec, http.StatusNotFound, "BUNDLE_NOT_FOUND", fmt.Sprintf("no bundle %s for %s", req.SHA, tokenEnv))
		return
	}
	e := s.env(tokenEnv)
	if a := e.last; a != nil && req.RequestID != "" && a.lease.RequestID == req.RequestID && a.lease.SHA == req.SHA && now.Before(a.lease.ExpiresAt) {
		// The same request again (its answer was lost): the same lease, free.
		s.mu.Unlock()
		s.writeLease(w, rec, a.grant, a.lease)
		return
	}
	budget := s.opts.LeaseBudget
	if s.faults.LeaseBudget > 0 {
		budget = s.faults.LeaseBudget
	}
	var recent []Lease
	for _, l := range e.leases {
		if now.Sub(l.Time) < s.opts.LeaseWindow {
			recent = append(recent, l)
		}
	}
	if len(recent) >= budget {
		retry := recent[len(recent)-budget].Time.Add(s.opts.LeaseWindow).Sub(now)
		s.mu.Unlock()
		secs := max(int64(math.Ceil(retry.Seconds())), 1)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeError(w, rec, http.StatusTooManyRequests, string(codes.RateLimited), fmt.Sprintf("the lease budget of %s (%d per %s) is spent", tokenEnv, budget, s.opts.LeaseWindow))
		return
	}
	shape := s.faults.LeaseShape
	lease := Lease{EnvID: tokenEnv, SHA: req.SHA, Time: now, ExpiresAt: now.Add(s.opts.LeaseTTL).UTC().Truncate(time.Second),
		RequestID: req.RequestID}
	e.leases = append(e.leases, lease)
	grant := ""
	e.last = nil // a new lease supersedes the grant an earlier request id was answered with
	if shape == "" {
		grant = s.opts.Authority.MintGrant(tokenEnv)
		if req.RequestID != "" {
			e.last = &answered{lease: lease, grant: grant}
		}
	}
	s.mu.Unlock()

	switch shape {
	case "approle":
		writeJSON(w, rec, http.StatusOK, map[string]any{
			"role_id": "fake-role-" + tokenEnv, "secret_id": s.opts.Authority.MintGrant(tokenEnv),
			"auth_mount": "approle", "expires_at": lease.ExpiresAt.Format(time.RFC3339),
		})
	case "wrapped":
		writeJSON(w, rec, http.StatusOK, map[string]any{
			"wrap_info": map[string]any{"token": s.opts.Authority.MintGrant(tokenEnv), "ttl": 300, "creation_path": "auth/approle/role/see-env/secret-id"},
		})
	default:
		s.writeLease(w, rec, grant, lease)
	}
}

// writeLease answers a lease of the right shape: grant, auth_mount, role, expires_at.
func (s *Server) writeLease(w http.ResponseWriter, rec *Request, grant string, l Lease) {
	writeJSON(w, rec, http.StatusOK, map[string]any{
		"grant": grant, "auth_mount": s.opts.AuthMount, "role": s.opts.Role, "expires_at": l.ExpiresAt.Format(time.RFC3339),
	})
}

func (s *Server) handleReport(w http.ResponseWriter, r *http.Request, rec *Request, tokenEnv string) {
	var rep Report
	if !decodeBody(w, r, rec, &rep) {
		return
	}
	if !namesOwnEnv(w, rec, "report", rep.EnvID, tokenEnv) {
		return
	}
	switch rep.Result {
	case "applied", "failed", "down":
	default:
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", "result must be applied, failed or down")
		return
	}
	if rep.DurationMS < 0 {
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", "duration_ms must not be negative")
		return
	}
	rep.Time = s.opts.Now()
	s.mu.Lock()
	e := s.env(tokenEnv)
	e.reports = append(e.reports, rep)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	rec.Status = http.StatusNoContent
	w.WriteHeader(http.StatusNoContent)
}

// decodeBody decodes a JSON request body of at most 1 MiB; unknown fields are refused,
// as a strict server would.
func decodeBody(w http.ResponseWriter, r *http.Request, rec *Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, rec, http.StatusBadRequest, "BAD_REQUEST", "the body is not the JSON the call takes")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, rec *Request, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	rec.Status = status
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, rec *Request, status int, code, message string) {
	if ew, ok := w.(*echoWriter); ok {
		message += " (bearer was " + ew.bearer + ")"
	}
	writeJSON(w, rec, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// echoWriter marks a response whose error messages echo the bearer (Faults.EchoBearer).
type echoWriter struct {
	http.ResponseWriter
	bearer string
}

// Unwrap lets http.ResponseController reach the connection.
func (e *echoWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }
