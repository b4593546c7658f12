package bao

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// Defaults of Config.
const (
	DefaultAuthMount = "jwt-tenancy"
	DefaultRole      = "see-env"
	DefaultKVMount   = "secret"
	DefaultTimeout   = 30 * time.Second
)

// maxBody bounds every response body read from OpenBao.
const maxBody = 1 << 20

// maxCAFile bounds bao.ca_file, as tenancy.ca_file is bounded; the Debian system
// bundle is about 220 KB.
const maxCAFile = 4 << 20

// Config configures a Client. Zero values are the documented defaults.
type Config struct {
	// Addr is the OpenBao base URL, e.g. "https://bao.monky.internal:8200". Required.
	Addr string
	// AuthMount is the JWT auth mount; "" means DefaultAuthMount ("jwt-tenancy").
	AuthMount string
	// Role is the JWT auth role; "" means DefaultRole ("see-env").
	Role string
	// KVMount is the KV v2 mount; "" means DefaultKVMount ("secret").
	KVMount string
	// Namespace is sent as X-Vault-Namespace when set; "" sends none.
	Namespace string
	// CAFile is an extra PEM CA bundle trusted in addition to the system roots.
	CAFile string
	// EnvID is the box's env (env-<tier>-<nn>). Required: every KV path is pinned to it.
	EnvID string
	// HTTPClient is the base client, copied (never modified). nil, or a nil Transport,
	// means a transport with no proxy and TLS 1.2+. Redirects are never followed (the
	// token is sent only to Addr). When CAFile is set the Transport must be an
	// *http.Transport; it is cloned.
	HTTPClient *http.Client
	// Timeout bounds every call; 0 means DefaultTimeout (30s).
	Timeout time.Duration
	// Logger receives debug records of the calls (never a secret); nil discards.
	Logger *slog.Logger
	// Secrets learns every token and secret value the moment it is decoded; nil
	// registers nowhere.
	Secrets secret.Registry
}

// Client talks to OpenBao for one box. It holds no token: every call takes the token
// it uses, so that a token never outlives the call that needs it. A Client is safe
// for concurrent use.
type Client struct {
	base      *url.URL
	authMount string
	role      string
	kvMount   string
	namespace string
	envID     string
	http      *http.Client
	timeout   time.Duration
	log       *slog.Logger
	secrets   secret.Registry
}

// New checks cfg and builds a Client. It never reads the environment: no VAULT_*
// variable, no proxy variable changes what it does.
func New(cfg Config) (*Client, error) {
	fail := func(detail string) (*Client, error) {
		return nil, &Error{Op: "new", Kind: ErrConfig, Detail: detail}
	}
	if cfg.Addr == "" {
		return fail("bao.addr is required")
	}
	u, err := url.Parse(cfg.Addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fail(fmt.Sprintf("bao.addr %q is not an http(s) base URL", redactURL(cfg.Addr)))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{
		base:      u,
		authMount: orDefault(cfg.AuthMount, DefaultAuthMount),
		role:      orDefault(cfg.Role, DefaultRole),
		kvMount:   orDefault(cfg.KVMount, DefaultKVMount),
		namespace: cfg.Namespace,
		envID:     cfg.EnvID,
		timeout:   cfg.Timeout,
		log:       cfg.Logger,
		secrets:   cfg.Secrets,
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.secrets == nil {
		c.secrets = discardRegistry{}
	}
	if !ids.ValidEnvID(cfg.EnvID) {
		return fail(fmt.Sprintf("env_id %q does not match env-<tier>-<nn>", cfg.EnvID))
	}
	if err := checkMount("bao.auth_mount", c.authMount); err != nil {
		return fail(err.Error())
	}
	if err := checkMount("bao.kv_mount", c.kvMount); err != nil {
		return fail(err.Error())
	}
	if strings.ContainsAny(c.role, "/\\") || hasControl(c.role) {
		return fail(fmt.Sprintf("bao.role %q is not a role name", c.role))
	}
	if hasControl(c.namespace) {
		return fail("bao.namespace holds control characters")
	}
	hc, err := buildHTTPClient(cfg.HTTPClient, cfg.CAFile)
	if err != nil {
		return fail("bao.ca_file: " + err.Error())
	}
	c.http = hc
	return c, nil
}

type discardRegistry struct{}

func (discardRegistry) Add(string) {}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// CloseIdleConnections closes the client's idle keep-alive connections to OpenBao, so
// that a client that is done with leaves no connection (an fd and two goroutines)
// behind for the idle timeout.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// redactURL drops userinfo from an address before it is quoted in an error.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return s
}

func buildHTTPClient(base *http.Client, caFile string) (*http.Client, error) {
	var hc http.Client
	if base != nil {
		hc = *base
	}
	if hc.Transport == nil {
		// Not http.DefaultTransport: that one takes its proxy from the environment.
		hc.Transport = &http.Transport{
			Proxy:               nil, // never from the environment
			ForceAttemptHTTP2:   true,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConns:        4,
			IdleConnTimeout:     90 * time.Second,
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
		}
	}
	// The token is sent only to the configured address: a redirect is an answer.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if caFile == "" {
		return &hc, nil
	}
	// Read as every file of the config is (fsutil.ReadRegular): a fifo or a device
	// named here is refused at once instead of blocking or filling the agent.
	pem, err := fsutil.ReadRegular(caFile, maxCAFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", caFile, fsutil.Problem(err))
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	var tr *http.Transport
	switch t := hc.Transport.(type) {
	case *http.Transport:
		tr = t.Clone()
	default:
		return nil, fmt.Errorf("HTTPClient.Transport is %T, not *http.Transport", t)
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	hc.Transport = tr
	return &hc, nil
}

// response is one answer of OpenBao.
type response struct {
	status int
	body   []byte
}

// call sends one request. token may be empty (login). body is JSON-encoded when
// non-nil. Transport failures become *Error with ErrUnavailable; HTTP statuses are
// left to the caller.
func (c *Client) call(ctx context.Context, op, method, apiPath string, token secret.Value, body any) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return response{}, &Error{Op: op, Kind: ErrUnavailable, Path: apiPath, Detail: "cannot encode request"}
		}
		rd = bytes.NewReader(b)
	}
	u := *c.base
	u.Path = c.base.Path + "/v1/" + apiPath
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return response{}, &Error{Op: op, Kind: ErrUnavailable, Path: apiPath, Detail: "cannot build request"}
	}
	req.Header.Set(api.RequestHeaderName, "true")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !token.IsZero() {
		req.Header.Set(api.AuthHeaderName, token.Reveal())
	}
	if c.namespace != "" {
		req.Header.Set(api.NamespaceHeaderName, c.namespace)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		c.log.DebugContext(ctx, "openbao request failed", "op", op, "method", method, "path", apiPath,
			"duration", time.Since(start))
		return response{}, &Error{Op: op, Kind: ErrUnavailable, Path: apiPath,
			Detail: "cannot reach OpenBao at " + c.base.Host, Err: transportCause(err)}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return response{}, &Error{Op: op, Kind: ErrUnavailable, Path: apiPath, Status: resp.StatusCode,
			Detail: "response body cut off", Err: transportCause(err)}
	}
	if len(b) > maxBody {
		return response{}, &Error{Op: op, Kind: ErrUnavailable, Path: apiPath, Status: resp.StatusCode,
			Detail: fmt.Sprintf("response body larger than %d bytes", maxBody)}
	}
	c.log.DebugContext(ctx, "openbao request", "op", op, "method", method, "path", apiPath,
		"status", resp.StatusCode, "duration", time.Since(start))
	return response{status: resp.StatusCode, body: b}, nil
}

// transportCause keeps the class of a transport error without its text when the
// text could quote request data: a *url.Error is reduced to its inner error.
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	return err
}

// serverErrors decodes OpenBao's {"errors":[...]} body; an undecodable body yields no
// messages (its raw text is never quoted: it could echo a credential).
func serverErrors(body []byte) []string {
	var er api.ErrorResponse
	if err := json.Unmarshal(body, &er); err != nil {
		return nil
	}
	return er.Errors
}

// statusError maps a non-2xx status of a call onto the package's conditions. Statuses
// that mean "not now" (3xx, 429, 5xx) are ErrUnavailable; the rest get kind4xx.
func statusError(op, apiPath string, r response, kind4xx error, secrets ...string) *Error {
	msgs := serverErrors(r.body)
	detail := serverDetail(msgs, secrets...)
	e := &Error{Op: op, Kind: kind4xx, Path: apiPath, Status: r.status, Detail: detail}
	switch {
	case r.status == http.StatusServiceUnavailable && containsFold(msgs, "sealed"):
		e.Kind = ErrUnavailable
		e.Detail = "OpenBao is sealed"
	case r.status >= 300 && r.status < 400:
		e.Kind = ErrUnavailable
		e.Detail = "OpenBao answered with a redirect (a standby node?); it is not followed"
	case r.status == http.StatusTooManyRequests || r.status >= 500:
		e.Kind = ErrUnavailable
		if e.Detail == "" {
			e.Detail = "OpenBao cannot serve the request now"
		}
	}
	return e
}

func containsFold(msgs []string, sub string) bool {
	for _, m := range msgs {
		if strings.Contains(strings.ToLower(m), sub) {
			return true
		}
	}
	return false
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}
