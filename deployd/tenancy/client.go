package tenancy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/deployd/secret"
)

// Defaults of Config.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultBundleTimeout = 10 * time.Minute
	DefaultMaxBundleSize = 1 << 30 // 1 GiB
	// DefaultAuthMount and DefaultRole are what a lease must name by default: the
	// OpenBao client's bao.DefaultAuthMount and bao.DefaultRole (this package does not
	// import deployd/bao; a test of deployd keeps them equal).
	DefaultAuthMount = "jwt-tenancy"
	DefaultRole      = "see-env"
	DefaultUserAgent = "monky-deployd"
	// MaxSignatureSize is the most the signature call reads of an answer: 4096
	// bytes, bundle.MaxSignatureSize (this package does not import deployd/bundle; a
	// test of deployd keeps the two equal).
	MaxSignatureSize = 4096
	// maxJSONBody bounds every JSON response the client reads.
	maxJSONBody = 1 << 20
)

// The Accept header of each kind of call.
const (
	acceptJSON      = "application/json"
	acceptBundle    = "application/x-tar, application/gzip, application/octet-stream"
	acceptSignature = "text/plain"
)

// Config configures a Client. Zero values of optional fields are the documented
// defaults.
type Config struct {
	// BaseURL of monky-tenancy, e.g. https://tenancy.monky.internal (required). A path
	// prefix is kept: the calls go to <BaseURL>/v1/agent/….
	BaseURL string
	// HTTPClient is the transport (OpenZiti SDK, proxy or system), built by the caller
	// (required). Its own Timeout, if any, applies on top of the client's deadlines. The
	// Client uses a copy that never follows redirects (a 3xx is ErrProtocol), so that
	// the bearer is only ever sent to BaseURL.
	HTTPClient *http.Client
	// Token returns the bearer of every call: the OpenBao token (required).
	Token func(ctx context.Context) (secret.Value, error)
	// UserAgent is sent on every call, "monky-deployd/<version>"; default
	// "monky-deployd".
	UserAgent string
	// Timeout bounds each JSON call; default 30s.
	Timeout time.Duration
	// BundleTimeout bounds a whole bundle download; default 10m.
	BundleTimeout time.Duration
	// MaxBundleSize caps a bundle download in bytes; default 1 GiB.
	MaxBundleSize int64
	// AuthMount and Role are what a lease must name; defaults "jwt-tenancy", "see-env".
	AuthMount, Role string
	// Secrets learns every grant (and any other secret a lease carries) the moment it
	// is decoded; nil means none.
	Secrets secret.Registry
	// Logger receives one debug line per call (op, status, duration), never a secret;
	// nil discards.
	Logger *slog.Logger
	// Now is the clock used to check a lease's expires_at and Retry-After dates;
	// default time.Now.
	Now func() time.Time
}

// Client calls the agent API of monky-tenancy. It is safe for concurrent use.
type Client struct {
	base          string
	hc            *http.Client
	token         func(ctx context.Context) (secret.Value, error)
	userAgent     string
	timeout       time.Duration
	bundleTimeout time.Duration
	maxBundle     int64
	authMount     string
	role          string
	secrets       secret.Registry
	log           *slog.Logger
	now           func() time.Time
}

type nopRegistry struct{}

// Add ignores the value.
func (nopRegistry) Add(string) {}

// New checks cfg and returns a Client. It fails, naming the field, when BaseURL is not
// an absolute http(s) URL or HTTPClient or Token is missing.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("tenancy: config: BaseURL is required: %w", ErrInvalidArgument)
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tenancy: config: BaseURL %q is not an absolute http(s) URL: %w", cfg.BaseURL, ErrInvalidArgument)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("tenancy: config: BaseURL must not carry user info, a query or a fragment: %w", ErrInvalidArgument)
	}
	if cfg.HTTPClient == nil {
		return nil, fmt.Errorf("tenancy: config: HTTPClient is required: %w", ErrInvalidArgument)
	}
	if cfg.Token == nil {
		return nil, fmt.Errorf("tenancy: config: Token is required: %w", ErrInvalidArgument)
	}
	if cfg.Timeout < 0 || cfg.BundleTimeout < 0 || cfg.MaxBundleSize < 0 {
		return nil, fmt.Errorf("tenancy: config: Timeout, BundleTimeout and MaxBundleSize must not be negative: %w", ErrInvalidArgument)
	}
	// A copy of the caller's client that never follows a redirect: the bearer goes to
	// the configured base URL only, and a 3xx is a protocol error.
	hc := *cfg.HTTPClient
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{
		base:          strings.TrimRight(cfg.BaseURL, "/"),
		hc:            &hc,
		token:         cfg.Token,
		userAgent:     cmpOr(cfg.UserAgent, DefaultUserAgent),
		timeout:       cmpOr(cfg.Timeout, DefaultTimeout),
		bundleTimeout: cmpOr(cfg.BundleTimeout, DefaultBundleTimeout),
		maxBundle:     cmpOr(cfg.MaxBundleSize, DefaultMaxBundleSize),
		authMount:     cmpOr(cfg.AuthMount, DefaultAuthMount),
		role:          cmpOr(cfg.Role, DefaultRole),
		secrets:       cfg.Secrets,
		log:           cfg.Logger,
		now:           cfg.Now,
	}
	if c.secrets == nil {
		c.secrets = nopRegistry{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Action is what a check-in asks the agent to do.
type Action string

// The check-in actions.
const (
	ActionApply Action = "apply"
	ActionNone  Action = "none"
	ActionDown  Action = "down"
)

// Result is the outcome the agent reports.
type Result string

// The report results.
const (
	ResultApplied Result = "applied"
	ResultFailed  Result = "failed"
	ResultDown    Result = "down"
)

// Host describes the box in a check-in.
type Host struct {
	// Hostname is the box's host name.
	Hostname string `json:"hostname"`
	// DockerVersion is the docker server version, "" if unknown.
	DockerVersion string `json:"docker_version"`
	// FreeMB is the free space under deploy_dir, in MiB.
	FreeMB int64 `json:"free_mb"`
}

// Checkin is the body of a check-in: who the agent is and what it runs.
type Checkin struct {
	// EnvID is the box's environment (required).
	EnvID string
	// AgentVersion is deployd.Version.
	AgentVersion string
	// CurrentSHA and CurrentSerial name the live release; "" and 0 when there is none.
	CurrentSHA    string
	CurrentSerial int64
	// LastResult is the result of the last report, "" before the first one.
	LastResult Result
	// LastCode is the code of the last report, "" if it had none.
	LastCode codes.Code
	// Host describes the box.
	Host Host
	// Live is the live release's health as the agent last read it; nil when nothing
	// is live (then the check-in carries no live object).
	Live *Live
	// Condition is what has kept the box from doing its job over its last runs; nil
	// when its last run ended 0 (then the check-in carries no condition object).
	Condition *Condition
	// Deferred is the apply the box prepared and did not switch to (a hold, a window);
	// nil while nothing waits (then the check-in carries no deferred object).
	Deferred *Deferred
}

// Live is the health of the box's live release, read from docker just before the
// check-in. It is an additive part of the check-in (docs/PROTOCOL.md): a tenancy that
// does not know it ignores it.
type Live struct {
	// ObservedAt is when docker was asked.
	ObservedAt time.Time
	// Healthy is true when every service of the live release is ready. It is
	// meaningful only when Reason is "".
	Healthy bool
	// Reason says why docker could not be asked ("" when it answered); Healthy and
	// Services are then not sent, and Services must be empty. It must already be
	// redacted by the caller; it is sent as valid UTF-8 within MaxLiveReason bytes.
	Reason string
	// Services holds each service of the live release, sorted by name; nil is sent as
	// [] when Reason is "". Only the first MaxLiveServices are sent.
	Services []LiveService
}

// Caps of the live object, so that a check-in stays small whatever docker answers (at
// most about 125 KiB of live with printable fields). The client applies them when it
// encodes a check-in; they are part of the protocol (docs/PROTOCOL.md).
const (
	// MaxLiveReason bounds Live.Reason in bytes: a longer reason keeps its head, cut at
	// a rune boundary and ending in LiveCut, within the bound.
	MaxLiveReason = 512
	// MaxLiveServices bounds the services sent: only the first MaxLiveServices of
	// Live.Services are (Healthy still speaks for all of them).
	MaxLiveServices = 256
	// MaxLiveField bounds a service's name, state and health in bytes; a longer one is
	// cut at a rune boundary.
	MaxLiveField = 128
	// LiveCut ends a reason that was cut to MaxLiveReason.
	LiveCut = " … (cut)"
)

// LiveService is one service of Live.
type LiveService struct {
	// Name is the compose service name (required).
	Name string `json:"name"`
	// State is docker's container state, or "missing" without a container.
	State string `json:"state"`
	// Health is "", starting, healthy or unhealthy.
	Health string `json:"health"`
	// ExitCode is the exit code of an exited container, 0 otherwise.
	ExitCode int `json:"exit_code"`
	// Restarts is how often docker restarted the service's containers.
	Restarts int `json:"restarts"`
}

// Instruction is tenancy's answer to a check-in. SHA, Serial, Retry and Rollback are
// set only with ActionApply; Purge only with ActionDown.
type Instruction struct {
	// Action is apply, none or down.
	Action Action
	// SHA is the bundle sha to apply (64 lowercase hex).
	SHA string
	// Serial is the bundle's serial (≥ 1).
	Serial int64
	// Purge asks down to remove volumes too (the agent never purges on prod).
	Purge bool
	// Retry asks to apply a sha that already failed on this box.
	Retry bool
	// Rollback allows a serial lower than the live release's.
	Rollback bool
	// NextCheckin is the interval tenancy asks for (next_checkin_s); 0 if not given.
	NextCheckin time.Duration
	// OverrideHold (override_hold, with apply) asks the box to apply although a
	// person at the box set a hold; it does not open a closed apply window.
	OverrideHold bool
}

// Lease is a deploy lease: the grant to log into OpenBao with, and where.
type Lease struct {
	// Grant is the deploy grant (a JWT) to log into OpenBao with.
	Grant secret.Value
	// AuthMount and Role are where and as what to log in; they equal the Config's.
	AuthMount string
	Role      string
	// ExpiresAt is when the grant stops being accepted.
	ExpiresAt time.Time
}

// ServiceState is one compose service in a report.
type ServiceState struct {
	// Name is the compose service name.
	Name string `json:"name"`
	// State is the container state (running, exited, …).
	State string `json:"state"`
	// Health is the healthcheck status, "" when the service has none.
	Health string `json:"health"`
}

// Report is the outcome of a tick. Detail and Tail must already be redacted by the
// caller; Duration goes on the wire as duration_ms.
type Report struct {
	// EnvID is the box's environment (required).
	EnvID string
	// SHA and Serial name the bundle the report is about: the instruction's with apply;
	// with down, the release that was live and was taken down ("" and 0 when nothing
	// was live).
	SHA    string
	Serial int64
	// Result is applied, failed or down.
	Result Result
	// Code is the refusal or failure code, "" on success.
	Code codes.Code
	// Detail names files, variables and services, never a value.
	Detail string
	// Tail is the redacted end of compose's output.
	Tail string
	// Services are the compose services as last seen; nil is sent as [].
	Services []ServiceState
	// Duration is how long the tick took.
	Duration time.Duration
}

type checkinBody struct {
	EnvID         string         `json:"env_id"`
	AgentVersion  string         `json:"agent_version"`
	CurrentSHA    string         `json:"current_sha"`
	CurrentSerial int64          `json:"current_serial"`
	LastResult    Result         `json:"last_result"`
	LastCode      codes.Code     `json:"last_code"`
	Host          Host           `json:"host"`
	Live          *liveWire      `json:"live,omitempty"`
	Condition     *conditionWire `json:"condition,omitempty"`
	Deferred      *Deferred      `json:"deferred,omitempty"`
}

// liveWire is Live as it travels: healthy and services only when docker answered.
type liveWire struct {
	ObservedAt string         `json:"observed_at"`
	Healthy    *bool          `json:"healthy,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Services   *[]LiveService `json:"services,omitempty"`
}

// newCheckinBody is req as it travels.
func newCheckinBody(req Checkin) checkinBody {
	b := checkinBody{
		EnvID: req.EnvID, AgentVersion: req.AgentVersion, CurrentSHA: req.CurrentSHA,
		CurrentSerial: req.CurrentSerial, LastResult: req.LastResult, LastCode: req.LastCode,
		Host: req.Host, Condition: req.Condition.wire(), Deferred: req.Deferred.wire(),
	}
	if l := req.Live; l != nil {
		b.Live = &liveWire{ObservedAt: l.ObservedAt.UTC().Format(time.RFC3339Nano), Reason: boundReason(l.Reason)}
		if l.Reason == "" {
			healthy := l.Healthy
			b.Live.Healthy = &healthy
			services := make([]LiveService, 0, min(len(l.Services), MaxLiveServices)) // [], never null
			for _, sv := range l.Services[:min(len(l.Services), MaxLiveServices)] {
				sv.Name, sv.State, sv.Health = cutUTF8(sv.Name, MaxLiveField), cutUTF8(sv.State, MaxLiveField), cutUTF8(sv.Health, MaxLiveField)
				services = append(services, sv)
			}
			b.Live.Services = &services
		}
	}
	return b
}

// validLive refuses, naming the field, a live object the agent must not send: no
// observed_at, a reason together with services, a service without a name or with a
// negative restart count.
func validLive(l *Live) error {
	if l == nil {
		return nil
	}
	if l.ObservedAt.IsZero() {
		return refuseCheckin("live.observed_at is required")
	}
	if l.Reason != "" && len(l.Services) > 0 {
		return refuseCheckin("live.reason and live.services are exclusive (services only when docker answered)")
	}
	for i, sv := range l.Services {
		if sv.Name == "" {
			return refuseCheckin(fmt.Sprintf("live.services[%d].name is required", i))
		}
		if sv.Restarts < 0 {
			return refuseCheckin(fmt.Sprintf("live.services[%d].restarts must not be negative", i))
		}
	}
	return nil
}

// boundReason makes a reason valid UTF-8 and keeps its head within MaxLiveReason
// bytes, ending in LiveCut when it was cut.
func boundReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxLiveReason {
		return s
	}
	return cutUTF8(s, MaxLiveReason-len(LiveCut)) + LiveCut
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends at a rune
// boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// leaseBody is LeaseRequest on the wire (a conversion: the same fields in order).
type leaseBody struct {
	EnvID     string `json:"env_id"`
	SHA       string `json:"sha"`
	RequestID string `json:"request_id,omitempty"`
}

type reportBody struct {
	EnvID      string         `json:"env_id"`
	SHA        string         `json:"sha"`
	Serial     int64          `json:"serial"`
	Result     Result         `json:"result"`
	Code       codes.Code     `json:"code"`
	Detail     string         `json:"detail"`
	Tail       string         `json:"tail"`
	Services   []ServiceState `json:"services"`
	DurationMS int64          `json:"duration_ms"`
}

// Checkin posts the check-in (the heartbeat) and returns tenancy's instruction. A
// Live without ObservedAt, with both Reason and Services, or with a service without a
// name is refused before sending, as ErrInvalidArgument naming the field; the caps
// (MaxLiveReason, MaxLiveServices, MaxLiveField) are applied as it is encoded.
func (c *Client) Checkin(ctx context.Context, req Checkin) (Instruction, error) {
	if req.EnvID == "" {
		return Instruction{}, refuseCheckin("env_id is required")
	}
	switch req.LastResult {
	case "", ResultApplied, ResultFailed, ResultDown:
	default:
		return Instruction{}, refuseCheckin(fmt.Sprintf("last_result %q is not applied, failed or down", req.LastResult))
	}
	if err := validLive(req.Live); err != nil {
		return Instruction{}, err
	}
	if err := validCondition(req.Condition); err != nil {
		return Instruction{}, err
	}
	if err := validDeferred(req.Deferred); err != nil {
		return Instruction{}, err
	}
	body := newCheckinBody(req)
	var ins Instruction
	err := c.callJSON(ctx, "checkin", "/v1/agent/checkin", body, http.StatusOK, func(data []byte) error {
		var derr error
		ins, derr = decodeInstruction(data)
		return derr
	})
	return ins, err
}

// Lease asks for a deploy lease for sha: RequestLease without a request id. The grant
// is added to Config.Secrets the moment it is decoded. A lease of the wrong shape is an
// ErrLeaseShape naming the field.
func (c *Client) Lease(ctx context.Context, envID, sha string) (Lease, error) {
	return c.RequestLease(ctx, LeaseRequest{EnvID: envID, SHA: sha})
}

// LeaseRequest is a request for a deploy lease.
type LeaseRequest struct {
	// EnvID and SHA name the environment and the bundle the lease is for.
	EnvID, SHA string
	// RequestID, when not "", makes the request safe to send again: a caller that
	// did not receive the answer (a timeout, a broken connection) sends the same
	// id, and a tenancy that knows the field answers with the lease it granted to
	// that id while it is unexpired, without spending the budget again
	// (docs/PROTOCOL.md, "One publish, one lease"). At most 64 characters of
	// [A-Za-z0-9_-].
	RequestID string
}

// RequestLease asks for a deploy lease as r says. The grant is added to
// Config.Secrets the moment it is decoded. A lease of the wrong shape is an
// ErrLeaseShape naming the field.
func (c *Client) RequestLease(ctx context.Context, r LeaseRequest) (Lease, error) {
	if r.EnvID == "" {
		return Lease{}, fmt.Errorf("tenancy: lease: env_id is required: %w", ErrInvalidArgument)
	}
	if !ids.ValidSHA(r.SHA) {
		return Lease{}, fmt.Errorf("tenancy: lease: sha is not 64 lowercase hex: %w", ErrInvalidArgument)
	}
	if !validRequestID(r.RequestID) {
		return Lease{}, fmt.Errorf("tenancy: lease: request_id is not at most 64 characters of [A-Za-z0-9_-]: %w", ErrInvalidArgument)
	}
	var l Lease
	err := c.callJSON(ctx, "lease", "/v1/agent/lease", leaseBody(r), http.StatusOK, func(data []byte) error {
		var derr error
		l, derr = decodeLease(data, c.authMount, c.role, c.now(), c.secrets)
		return derr
	})
	return l, err
}

// validRequestID reports whether id is "" or at most 64 characters of [A-Za-z0-9_-].
func validRequestID(id string) bool {
	if len(id) > 64 {
		return false
	}
	return strings.IndexFunc(id, func(r rune) bool {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return false
		}
		return true
	}) < 0
}

// Report posts the outcome of a tick; tenancy answers 204.
func (c *Client) Report(ctx context.Context, r Report) error {
	if r.EnvID == "" {
		return fmt.Errorf("tenancy: report: env_id is required: %w", ErrInvalidArgument)
	}
	switch r.Result {
	case ResultApplied, ResultFailed, ResultDown:
	default:
		return fmt.Errorf("tenancy: report: result %q is not applied, failed or down: %w", r.Result, ErrInvalidArgument)
	}
	services := r.Services
	if services == nil {
		services = []ServiceState{}
	}
	body := reportBody{
		EnvID: r.EnvID, SHA: r.SHA, Serial: r.Serial, Result: r.Result, Code: r.Code,
		Detail: r.Detail, Tail: r.Tail, Services: services, DurationMS: r.Duration.Milliseconds(),
	}
	return c.callJSON(ctx, "report", "/v1/agent/report", body, 0, nil)
}

// Bundle streams the bundle sha into w and returns the number of bytes written. The
// body is never buffered whole; passing Config.MaxBundleSize is ErrBundleTooLarge
// (w then holds a prefix that the caller must discard).
func (c *Client) Bundle(ctx context.Context, sha string, w io.Writer) (int64, error) {
	const op = "bundle"
	if !ids.ValidSHA(sha) {
		return 0, fmt.Errorf("tenancy: bundle: sha is not 64 lowercase hex: %w", ErrInvalidArgument)
	}
	ctx, cancel := context.WithTimeout(ctx, c.bundleTimeout)
	defer cancel()
	start := time.Now()
	resp, tok, err := c.send(ctx, op, http.MethodGet, "/v1/agent/bundles/"+sha, nil, acceptBundle)
	if err != nil {
		return 0, err
	}
	defer drainClose(resp)
	c.logCall(ctx, op, resp.StatusCode, start)
	if resp.StatusCode != http.StatusOK {
		return 0, c.statusError(op, resp, tok)
	}
	if resp.ContentLength > c.maxBundle {
		return 0, &APIError{Op: op, Status: resp.StatusCode, Kind: ErrBundleTooLarge,
			Message: fmt.Sprintf("bundle %s announces %d bytes, the limit is %d", sha, resp.ContentLength, c.maxBundle)}
	}
	n, err := copyCapped(w, resp.Body, c.maxBundle)
	switch {
	case errors.Is(err, ErrBundleTooLarge):
		return n, &APIError{Op: op, Status: resp.StatusCode, Kind: ErrBundleTooLarge,
			Message: fmt.Sprintf("bundle %s is larger than the limit of %d bytes", sha, c.maxBundle)}
	case errors.Is(err, errWrite):
		return n, fmt.Errorf("tenancy: bundle %s: %w", sha, err)
	case err != nil:
		return n, &APIError{Op: op, Status: resp.StatusCode, Kind: ErrUnavailable,
			Message: fmt.Sprintf("reading bundle %s after %d bytes", sha, n), Err: err}
	}
	return n, nil
}

// Signature is tenancy's answer to the signature call: the signature file published
// with a bundle, or none.
type Signature struct {
	// Data is the signature file, byte for byte as tenancy serves it (at most
	// MaxSignatureSize bytes; empty when tenancy serves an empty file); nil when
	// Unsigned.
	Data []byte
	// Unsigned is true when tenancy publishes no signature for the sha (404): an
	// answer, not a failure of the call. A tenancy that does not know the call
	// answers 404 too, so that a box that requires signatures fails closed.
	Unsigned bool
}

// Signature fetches the signature published with the bundle sha
// (GET /v1/agent/bundles/<sha>/signature, Accept: text/plain), bounded by
// Config.Timeout. A 404 is Signature{Unsigned: true} and no error; an answer longer
// than MaxSignatureSize is ErrSignatureTooLarge (code SIGNATURE_INVALID); every other
// failure is classified as the other calls' are (401, 409, 429, 5xx, a cut-short
// body, …).
func (c *Client) Signature(ctx context.Context, sha string) (Signature, error) {
	const op = "signature"
	if !ids.ValidSHA(sha) {
		return Signature{}, fmt.Errorf("tenancy: signature: sha is not 64 lowercase hex: %w", ErrInvalidArgument)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	resp, tok, err := c.send(ctx, op, http.MethodGet, "/v1/agent/bundles/"+sha+"/signature", nil, acceptSignature)
	if err != nil {
		return Signature{}, err
	}
	defer drainClose(resp)
	c.logCall(ctx, op, resp.StatusCode, start)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return Signature{Unsigned: true}, nil
	default:
		return Signature{}, c.statusError(op, resp, tok)
	}
	tooLarge := &APIError{Op: op, Status: resp.StatusCode, Kind: ErrSignatureTooLarge,
		Message: fmt.Sprintf("the signature of %s is longer than %d bytes", sha, MaxSignatureSize)}
	if resp.ContentLength > MaxSignatureSize {
		return Signature{}, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxSignatureSize+1))
	switch {
	case err != nil:
		return Signature{}, &APIError{Op: op, Status: resp.StatusCode, Kind: ErrUnavailable,
			Message: fmt.Sprintf("reading the signature of %s after %d bytes", sha, len(data)), Err: err}
	case len(data) > MaxSignatureSize:
		return Signature{}, tooLarge
	}
	return Signature{Data: data}, nil
}

// errWrite marks a failure of the caller's writer during a bundle download.
var errWrite = errors.New("writing the bundle")

// copyCapped copies src into dst and fails with ErrBundleTooLarge as soon as more than
// limit bytes arrive.
func copyCapped(dst io.Writer, src io.Reader, limit int64) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		m, rerr := src.Read(buf)
		if m > 0 {
			if n+int64(m) > limit {
				return n, ErrBundleTooLarge
			}
			w, werr := dst.Write(buf[:m])
			n += int64(w)
			if werr != nil {
				return n, fmt.Errorf("%w: %w", errWrite, werr)
			}
			if w != m {
				return n, fmt.Errorf("%w: %w", errWrite, io.ErrShortWrite)
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// callJSON posts body as JSON and hands the response to decode. want is the expected
// status (0: any 2xx, body ignored).
func (c *Client) callJSON(ctx context.Context, op, path string, body any, want int, decode func([]byte) error) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("tenancy: %s: encoding the request: %w", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	resp, tok, err := c.send(ctx, op, http.MethodPost, path, payload, acceptJSON)
	if err != nil {
		return err
	}
	defer drainClose(resp)
	c.logCall(ctx, op, resp.StatusCode, start)
	ok := resp.StatusCode == want || (want == 0 && resp.StatusCode >= 200 && resp.StatusCode < 300)
	if !ok {
		return c.statusError(op, resp, tok)
	}
	if decode == nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody+1))
	if err != nil {
		return &APIError{Op: op, Status: resp.StatusCode, Kind: ErrUnavailable, Message: "reading the response", Err: err}
	}
	if len(data) > maxJSONBody {
		return &APIError{Op: op, Status: resp.StatusCode, Kind: ErrProtocol, Message: fmt.Sprintf("response larger than %d bytes", maxJSONBody)}
	}
	if err := decode(data); err != nil {
		var ae *APIError
		if errors.As(err, &ae) {
			ae.Op, ae.Status = op, resp.StatusCode
			return ae
		}
		return &APIError{Op: op, Status: resp.StatusCode, Kind: ErrProtocol, Message: sanitiseMessage(err.Error(), tok)}
	}
	return nil
}

// send builds and sends one request with the bearer, User-Agent, Content-Type and
// accept. It returns the revealed token too, so that error bodies can be scrubbed of
// it.
func (c *Client) send(ctx context.Context, op, method, path string, payload []byte, accept string) (*http.Response, string, error) {
	tokv, err := c.token(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("tenancy: %s: obtaining the bearer: %w", op, err)
	}
	tok := tokv.Reveal()
	if tok == "" {
		return nil, "", &APIError{Op: op, Kind: ErrUnauthenticated, Message: "no bearer token: bootstrap with a fresh grant"}
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, tok, fmt.Errorf("tenancy: %s: building the request: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.log.DebugContext(ctx, "tenancy call failed", "op", op, "error", sanitiseMessage(err.Error(), tok))
		return nil, tok, &APIError{Op: op, Kind: ErrUnavailable, Message: "no response", Err: scrubbedError{err, tok}}
	}
	return resp, tok, nil
}

// scrubbedError keeps an underlying error reachable for errors.Is/As while its text is
// scrubbed of the bearer (url.Error never holds headers, but a custom transport might
// put anything in its text).
type scrubbedError struct {
	err error
	tok string
}

// Error returns the cause's text without the bearer.
func (s scrubbedError) Error() string { return sanitiseMessage(s.err.Error(), s.tok) }

// Unwrap returns the cause.
func (s scrubbedError) Unwrap() error { return s.err }

func (c *Client) logCall(ctx context.Context, op string, status int, start time.Time) {
	c.log.DebugContext(ctx, "tenancy call", "op", op, "status", status, "duration", time.Since(start).Round(time.Millisecond))
}

// statusError maps a non-success response onto an *APIError.
func (c *Client) statusError(op string, resp *http.Response, tok string) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	code, msg := decodeErrorBody(data)
	e := &APIError{Op: op, Status: resp.StatusCode, ServerCode: sanitiseCode(code), Message: sanitiseMessage(msg, tok)}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(resp.StatusCode))
	}
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized:
		e.Kind = ErrUnauthenticated
	case s == http.StatusConflict, s == http.StatusForbidden && codes.Code(e.ServerCode) == codes.AgentEnvMismatch:
		e.Kind = ErrEnvMismatch
	case s == http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
	case s == http.StatusRequestTimeout, s >= 500:
		e.Kind = ErrUnavailable
	default:
		e.Kind = ErrProtocol
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), c.now()); ok {
		e.RetryAfter = d
	}
	return e
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > int64(365*24*time.Hour/time.Second) {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d.Round(time.Second), true
}

// drainClose reads a bounded remainder of resp's body, so that the connection can be
// reused, and closes it. Neither error matters: the response has been dealt with.
func drainClose(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}
