package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Dialer opens one connection to an OpenZiti service. It is the part of a ziti.Context
// the sdk transport uses, so that the transport can run over any dialer (a test's, or a
// caller's long-lived *zititransport.ZitiDialer). Dial may block; it must be safe for
// concurrent use.
type Dialer interface {
	Dial(service string) (net.Conn, error)
}

// DialCloser is a Dialer that holds resources to release, such as the OpenZiti context
// of a *zititransport.ZitiDialer. NewWithOwnedDialer takes one.
type DialCloser interface {
	Dialer
	io.Closer
}

// Client is the HTTP client for tenancy over one transport. HTTP has no overall
// Timeout: the tenancy client puts a deadline on each call's context (a bundle download
// may legitimately take longer than a check-in); the transport bounds the dial, the TLS
// handshake and the wait for response headers with Config.Timeout each.
type Client struct {
	// HTTP is the client to give to the tenancy client. Its Transport is an
	// *http.Transport built by this package.
	HTTP *http.Client

	kind      string
	transport *http.Transport
	log       *slog.Logger

	closed   atomic.Bool
	once     sync.Once
	closeErr error
	// owned is closed by Close: the dialer of NewWithOwnedDialer (nil otherwise).
	owned io.Closer
}

// Transport returns the kind of transport: "sdk", "proxy" or "system".
func (c *Client) Transport() string { return c.kind }

// New builds the client for cfg.Transport "proxy" or "system". This package does not
// link the OpenZiti SDK: for "sdk" New returns an *Error of kind ErrNeedsSDK, and the
// caller builds the client with zititransport.New (internal/transport/zititransport),
// which handles all three. ctx is checked, not kept.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Transport == TransportSDK {
		return nil, &Error{Kind: ErrNeedsSDK, Key: "tenancy.transport",
			Detail: `"sdk" needs the OpenZiti SDK, which this program does not link`}
	}
	s, err := validate(cfg)
	if err != nil {
		return nil, err
	}
	if s.kind == TransportProxy {
		return newProxy(s), nil
	}
	return newSystem(s), nil
}

// NewWithDialer builds the sdk transport over d, whatever cfg.Transport says: requests
// to cfg.URL go over connections d opens to cfg.Service. The Client does not own d:
// Close leaves it open, so that a caller can keep one authenticated ziti context across
// ticks and build a Client per tick.
func NewWithDialer(cfg Config, d Dialer) (*Client, error) {
	s, err := validateSDK(cfg, d != nil)
	if err != nil {
		return nil, err
	}
	return newSDK(s, d), nil
}

// validateSDK validates cfg as an sdk transport's, with or without a dialer.
func validateSDK(cfg Config, dialer bool) (*settings, error) {
	if !dialer {
		return nil, invalid("tenancy.transport", "sdk transport without a dialer")
	}
	cfg.Transport = TransportSDK
	return validate(cfg)
}

// NewWithOwnedDialer builds the sdk transport like NewWithDialer, over a dialer the
// Client owns: cfg is validated first, open is called only if cfg is valid (so a
// config error comes before the dialer's own, and no dialer is created in vain), and
// Client.Close closes what open returned. An error of open is returned as it is. It is
// the hook through which zititransport.New builds a Client that releases its OpenZiti
// context.
func NewWithOwnedDialer(cfg Config, open func() (DialCloser, error)) (*Client, error) {
	s, err := validateSDK(cfg, open != nil)
	if err != nil {
		return nil, err
	}
	d, err := open()
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, invalid("tenancy.transport", "sdk transport without a dialer")
	}
	c := newSDK(s, d)
	c.owned = d
	return c, nil
}

// baseTransport holds the settings every transport shares.
func baseTransport(s *settings) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // never from the environment: see the package doc
		TLSClientConfig:       s.tls.Clone(),
		TLSHandshakeTimeout:   s.timeout,
		ResponseHeaderTimeout: s.timeout,
		ExpectContinueTimeout: expectContinueTimeout,
		IdleConnTimeout:       idleConnTimeout,
		MaxIdleConns:          maxIdleConns,
		MaxIdleConnsPerHost:   maxIdleConns,
		ForceAttemptHTTP2:     false,
	}
}

func newClient(s *settings, t *http.Transport) *Client {
	s.log.Debug("transport: tenancy client ready",
		"transport", s.kind, "url", s.url.Redacted(), "server_name", s.serverName, "timeout", s.timeout)
	return &Client{
		HTTP:      &http.Client{Transport: t, CheckRedirect: sameOrigin(s.url)},
		kind:      s.kind,
		transport: t,
		log:       s.log,
	}
}

// maxRedirects is the number of same-origin redirects followed, as net/http's default.
const maxRedirects = 10

// sameOrigin follows redirects within the tenancy URL's scheme and host only. A
// redirect elsewhere is not followed: the 3xx response itself is returned to the
// caller (the tenancy client reports it as a protocol error). With the sdk transport
// another host would still be dialed through the tenancy service, and with the others
// the agent would leave the one endpoint it is configured for.
func sameOrigin(base *url.URL) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != base.Scheme || !strings.EqualFold(req.URL.Host, base.Host) {
			return http.ErrUseLastResponse
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("transport: stopped after %d redirects", maxRedirects)
		}
		return nil
	}
}

func newSystem(s *settings) *Client {
	t := baseTransport(s)
	d := &net.Dialer{Timeout: s.timeout, KeepAlive: tcpKeepAlive}
	c := newClient(s, t)
	t.DialContext = c.guard(d.DialContext)
	return c
}

func newProxy(s *settings) *Client {
	t := baseTransport(s)
	t.Proxy = http.ProxyURL(s.proxy)
	t.OnProxyConnectResponse = proxyConnectResponse(s.proxy) //nolint:bodyclose // net/http owns the CONNECT response and closes the connection on an error
	d := &net.Dialer{Timeout: s.timeout, KeepAlive: tcpKeepAlive}
	c := newClient(s, t)
	t.DialContext = c.guard(d.DialContext)
	return c
}

// proxyConnectResponse turns a CONNECT refused by the proxy (the tunneler answers 502
// or 503 when the service cannot be dialed) into an ErrUnreachable network error; the
// standard library would return a bare errors.New(status text).
func proxyConnectResponse(proxy *url.URL) func(context.Context, *url.URL, *http.Request, *http.Response) error {
	proxyAddr := proxy.Host
	return func(_ context.Context, _ *url.URL, req *http.Request, resp *http.Response) error {
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		return &net.OpError{Op: "proxyconnect", Net: "tcp", Addr: stringAddr{"tcp", proxyAddr}, Err: &Error{
			Kind:   ErrUnreachable,
			Detail: fmt.Sprintf("proxy %s refused CONNECT %s: %s", proxyAddr, req.Host, statusText(resp)),
		}}
	}
}

func statusText(resp *http.Response) string {
	if t := http.StatusText(resp.StatusCode); t != "" {
		return strconv.Itoa(resp.StatusCode) + " " + t
	}
	return strconv.Itoa(resp.StatusCode)
}

func newSDK(s *settings, d Dialer) *Client {
	t := baseTransport(s)
	c := newClient(s, t)
	t.DialContext = c.guard(sdkDial(d, s.service, s.timeout, s.log))
	return c
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// guard refuses dials after Close.
func (c *Client) guard(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if c.closed.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &Error{Kind: ErrClosed}}
		}
		return dial(ctx, network, addr)
	}
}

// sdkDial returns a DialContext that ignores the network address and dials service
// through d. The blocking Dial runs in a goroutine so that ctx cancellation and its
// deadline interrupt the wait; a connection that arrives after the caller gave up is
// closed. Every failure is a *net.OpError whose Err is an *Error of the ErrUnreachable
// family (or ErrServiceNotFound/ErrController when d says so).
func sdkDial(d Dialer, service string, timeout time.Duration, log *slog.Logger) dialFunc {
	addr := stringAddr{"ziti", service}
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		if err := ctx.Err(); err != nil {
			return nil, dialError(addr, service, ctxError(err))
		}
		done := make(chan dialResult, 1)
		start := time.Now()
		go func() {
			conn, err := d.Dial(service)
			done <- dialResult{conn, err}
		}()
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case r := <-done:
			if r.err != nil {
				log.Debug("transport: OpenZiti dial failed", "service", service, "elapsed", time.Since(start), "err", r.err)
				return nil, dialError(addr, service, r.err)
			}
			if r.conn == nil {
				return nil, dialError(addr, service, errors.New("dialer returned no connection"))
			}
			log.Debug("transport: OpenZiti dial", "service", service, "elapsed", time.Since(start))
			return r.conn, nil
		case <-ctx.Done():
			go closeLate(done, service, log)
			return nil, dialError(addr, service, ctxError(ctx.Err()))
		case <-timer.C:
			go closeLate(done, service, log)
			return nil, dialError(addr, service, &Error{Kind: ErrUnreachable,
				Detail: fmt.Sprintf("no connection within %s", timeout), timeout: true})
		}
	}
}

// dialResult is what the goroutine of a dial hands back.
type dialResult struct {
	conn net.Conn
	err  error
}

// closeLate waits for an abandoned dial and closes its connection.
func closeLate(done <-chan dialResult, service string, log *slog.Logger) {
	if r := <-done; r.conn != nil {
		_ = r.conn.Close()
		log.Debug("transport: closed an OpenZiti connection that arrived after its dial was abandoned", "service", service)
	}
}

// ctxError is the *Error of a dial interrupted by its context.
func ctxError(err error) *Error {
	return &Error{Kind: ErrUnreachable, Detail: "dial interrupted", Err: err,
		timeout: errors.Is(err, context.DeadlineExceeded)}
}

// dialError wraps a dial failure as *net.OpError{Op: "dial", Net: "ziti"} around an
// *Error naming the service.
func dialError(addr net.Addr, service string, err error) error {
	e := &Error{Kind: ErrUnreachable, Service: service, Err: err}
	var inner *Error
	if errors.As(err, &inner) {
		// A copy: the dialer's error may be shared and is not ours to change.
		e = &Error{Kind: inner.Kind, Service: service, Detail: inner.Detail, Err: inner.Err, timeout: inner.timeout}
		if e.Kind == nil {
			e.Kind = ErrUnreachable
		}
	}
	return &net.OpError{Op: "dial", Net: "ziti", Addr: addr, Err: e}
}

// stringAddr is a net.Addr for the OpenZiti service (or the proxy) of an error.
type stringAddr struct{ net, addr string }

func (a stringAddr) Network() string { return a.net }
func (a stringAddr) String() string  { return a.addr }

// Close closes the idle connections, refuses new dials and, for a Client built by
// NewWithOwnedDialer (zititransport.New with the sdk transport), closes the dialer (a
// ZitiDialer closes its OpenZiti context: its edge-router channels, its refresh
// goroutine and the controller's idle HTTP connections). Requests in flight are
// not waited for. Close is idempotent; it returns the first close error.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.transport.CloseIdleConnections()
		if c.owned != nil {
			c.closeErr = c.owned.Close()
		}
		c.log.Debug("transport: tenancy client closed", "transport", c.kind)
	})
	return c.closeErr
}
