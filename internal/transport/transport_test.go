package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// get does a GET of rawURL with c and returns the body (transporttest.Get).
func get(ctx context.Context, t *testing.T, c *Client, rawURL string) (string, error) {
	t.Helper()
	return transporttest.Get(ctx, t, c.HTTP, rawURL)
}

// hello GETs rawURL with c, requires ts's greeting and returns what ts saw of the
// last request.
func hello(t *testing.T, ts *tenancyServer, c *Client, rawURL string) seen {
	t.Helper()
	body, err := get(t.Context(), t, c, rawURL)
	require.NoError(t, err)
	assert.Equal(t, "tenancy says hello", body)
	reqs := ts.requests()
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1]
}

// errAs requires err to hold an error of type T and returns it.
func errAs[T error](t *testing.T, err error) T {
	t.Helper()
	var target T
	require.ErrorAs(t, err, &target)
	return target
}

// open is New with cfg, closed when the test ends.
func open(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSystemTransport(t *testing.T) {
	ts := newTenancyServer(t)
	base := "https://" + ts.addr()

	t.Run("server_name override verifies the name while dialing 127.0.0.1", func(t *testing.T) {
		c, err := New(t.Context(), Config{Transport: TransportSystem, URL: base, CAFile: ts.CAFile, ServerName: transporttest.TenancyName})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		assert.Equal(t, TransportSystem, c.Transport())

		last := hello(t, ts, c, base+"/v1/agent/checkin")
		assert.Equal(t, transporttest.TenancyName, last.SNI)
		assert.Equal(t, ts.addr(), last.Host)

		tr := c.HTTP.Transport.(*http.Transport)
		assert.Nil(t, tr.Proxy, "the system transport never takes a proxy from the environment")
		assert.False(t, tr.ForceAttemptHTTP2)
	})

	for _, tc := range []struct {
		name string
		cfg  Config
		want error // a pointer to the kind of error the GET fails with
	}{
		{"without the override the certificate does not cover 127.0.0.1",
			Config{Transport: TransportSystem, URL: base, CAFile: ts.CAFile}, new(x509.HostnameError)},
		{"without ca_file the test CA is not trusted",
			Config{Transport: TransportSystem, URL: base, ServerName: transporttest.TenancyName}, new(x509.UnknownAuthorityError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := get(t.Context(), t, open(t, tc.cfg), base+"/")
			require.ErrorAs(t, err, tc.want)
		})
	}

	t.Run("a refused connection is a *net.OpError", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		c := open(t, Config{Transport: TransportSystem, URL: "https://" + addr, CAFile: ts.CAFile})
		_, err = get(t.Context(), t, c, "https://"+addr+"/")
		assert.Equal(t, "dial", errAs[*net.OpError](t, err).Op)
	})
}

// connectProxy is a small HTTP proxy on loopback: CONNECT is tunnelled to backend
// whatever the target (as a tunneler intercepts the tenancy name); absolute-form
// requests are answered by the proxy itself. It records what it was asked.
type connectProxy struct {
	ln      net.Listener
	backend string
	refuse  int // when not 0, CONNECT is answered with this status

	mu      sync.Mutex
	methods []string
	targets []string
	wg      sync.WaitGroup
}

func newConnectProxy(t *testing.T, backend string, refuse int) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &connectProxy{ln: ln, backend: backend, refuse: refuse}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *connectProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *connectProxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(conn)
		}()
	}
}

func (p *connectProxy) record(method, target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.methods = append(p.methods, method)
	p.targets = append(p.targets, target)
}

func (p *connectProxy) seen() ([]string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.methods...), append([]string(nil), p.targets...)
}

func (p *connectProxy) serve(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	p.record(req.Method, req.RequestURI)
	if req.Method != http.MethodConnect {
		body := "answered by the proxy for " + req.RequestURI
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		return
	}
	if p.refuse != 0 {
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", p.refuse, http.StatusText(p.refuse))
		return
	}
	up, err := net.Dial("tcp", p.backend)
	if err != nil {
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer func() { _ = up.Close() }()
	_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

func TestProxyTransport(t *testing.T) {
	ts := newTenancyServer(t)

	t.Run("https goes through CONNECT with TLS end to end", func(t *testing.T) {
		p := newConnectProxy(t, ts.addr(), 0)
		c := open(t, Config{Transport: TransportProxy, URL: "https://" + transporttest.TenancyName, Proxy: p.url(), CAFile: ts.CAFile})

		last := hello(t, ts, c, "https://"+transporttest.TenancyName+"/v1/agent/checkin")
		methods, targets := p.seen()
		assert.Equal(t, []string{http.MethodConnect}, methods)
		assert.Equal(t, []string{transporttest.TenancyName + ":443"}, targets)
		require.Len(t, ts.requests(), 1)
		assert.Equal(t, transporttest.TenancyName, last.SNI)
		assert.Equal(t, transporttest.TenancyName, last.Host)
	})

	t.Run("http goes in absolute form", func(t *testing.T) {
		p := newConnectProxy(t, ts.addr(), 0)
		c := open(t, Config{Transport: TransportProxy, URL: "http://127.0.0.1:9", Proxy: p.url()})
		body, err := get(t.Context(), t, c, "http://127.0.0.1:9/v1/agent/report")
		require.NoError(t, err)
		assert.Equal(t, "answered by the proxy for http://127.0.0.1:9/v1/agent/report", body)
		methods, _ := p.seen()
		assert.Equal(t, []string{http.MethodGet}, methods)
	})

	t.Run("a refused CONNECT is an ErrUnreachable network error", func(t *testing.T) {
		p := newConnectProxy(t, ts.addr(), http.StatusBadGateway)
		c := open(t, Config{Transport: TransportProxy, URL: "https://" + transporttest.TenancyName, Proxy: p.url(), CAFile: ts.CAFile})
		_, err := get(t.Context(), t, c, "https://"+transporttest.TenancyName+"/")
		require.ErrorIs(t, err, ErrUnreachable)
		assert.Equal(t, "proxyconnect", errAs[*net.OpError](t, err).Op)
		te := errAs[*Error](t, err)
		assert.Equal(t, codes.Unavailable, te.Code())
		assert.True(t, te.Temporary())
		assert.Contains(t, err.Error(), "502 Bad Gateway")
		assert.Contains(t, err.Error(), transporttest.TenancyName+":443")
	})

	t.Run("the proxy's credentials never show in errors", func(t *testing.T) {
		_, err := New(t.Context(), Config{Transport: TransportProxy, URL: "https://" + transporttest.TenancyName, Proxy: "socks5://user:hunter2@127.0.0.1:1080"})
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.NotContains(t, err.Error(), "hunter2")
		assert.Contains(t, err.Error(), "tenancy.proxy")
	})
}

// loopDialer is a Dialer that connects to a loopback address, counting its dials.
type loopDialer struct {
	addr     string
	dials    atomic.Int32
	services sync.Map
	closed   atomic.Bool
}

func (d *loopDialer) Dial(service string) (net.Conn, error) {
	d.dials.Add(1)
	d.services.Store(service, true)
	return net.Dial("tcp", d.addr)
}

func (d *loopDialer) Close() error {
	d.closed.Store(true)
	return nil
}

// dialerFunc adapts a function to Dialer.
type dialerFunc func(service string) (net.Conn, error)

func (f dialerFunc) Dial(service string) (net.Conn, error) { return f(service) }

// openSDK is NewWithDialer with cfg and d, closed when the test ends.
func openSDK(t *testing.T, cfg Config, d Dialer) *Client {
	t.Helper()
	c, err := NewWithDialer(cfg, d)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// hangingDialer is a Dialer whose dials wait for unblock, then connect to one end
// of a pipe: late, whose closing the test can wait for. started is closed at the
// first dial.
func hangingDialer(t *testing.T, unblock <-chan struct{}) (d dialerFunc, late *trackedConn, started chan struct{}) {
	late, started = &trackedConn{}, make(chan struct{})
	var once sync.Once
	return func(string) (net.Conn, error) {
		once.Do(func() { close(started) })
		<-unblock
		a, b := net.Pipe()
		late.Conn = a
		t.Cleanup(func() { _ = b.Close() })
		return late, nil
	}, late, started
}

func TestSDKTransport(t *testing.T) {
	ts := newTenancyServer(t)
	base := "https://" + transporttest.TenancyName
	cfg := Config{URL: base, Service: "monky-tenancy", CAFile: ts.CAFile, Timeout: 5 * time.Second}

	// SNI is the URL's host, or server_name when set; Host is always the URL's host.
	for _, tc := range []struct{ name, host, serverName string }{
		{"Host and SNI are the URL host, the service is dialed", transporttest.TenancyName, ""},
		{"server_name overrides SNI but not Host", "tenancy.example.org", transporttest.TenancyName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &loopDialer{addr: ts.addr()}
			c2 := cfg
			c2.URL, c2.ServerName = "https://"+tc.host, tc.serverName
			c := openSDK(t, c2, d)
			assert.Equal(t, TransportSDK, c.Transport())
			last := hello(t, ts, c, c2.URL+"/v1/agent/checkin")
			assert.Equal(t, tc.host, last.Host)
			assert.Equal(t, transporttest.TenancyName, last.SNI)
			_, ok := d.services.Load("monky-tenancy")
			assert.True(t, ok)
			assert.Nil(t, c.HTTP.Transport.(*http.Transport).Proxy)
		})
	}

	t.Run("concurrent requests each get their own connection", func(t *testing.T) {
		const n = 5
		srv := newTenancyServer(t)
		var arrived sync.WaitGroup
		arrived.Add(n)
		release := make(chan struct{})
		srv.handle = func(http.ResponseWriter, *http.Request) {
			arrived.Done()
			<-release
		}
		allIn := make(chan struct{})
		go func() { arrived.Wait(); close(allIn) }()

		d := &loopDialer{addr: srv.addr()}
		c3 := cfg
		c3.CAFile = srv.CAFile
		c := openSDK(t, c3, d)

		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := get(t.Context(), t, c, base+"/v1/agent/bundles/x")
				errs <- err
			}()
		}
		select {
		case <-allIn:
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatalf("only some of %d concurrent requests reached the server: they share a connection", n)
		}
		close(release)
		for range n {
			require.NoError(t, <-errs)
		}
		assert.Equal(t, int32(n), d.dials.Load())
		remotes := map[string]bool{}
		for _, r := range srv.requests() {
			remotes[r.RemoteAddr] = true
		}
		assert.Len(t, remotes, n)
	})

	t.Run("a cancelled request returns at once and Close interrupts its hanging dial", func(t *testing.T) {
		unblock := make(chan struct{})
		d, late, started := hangingDialer(t, unblock)
		c, err := NewWithDialer(cfg, d)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-started; cancel() }() // the request is in its dial
		start := time.Now()
		_, err = get(ctx, t, c, base+"/")
		require.ErrorIs(t, err, context.Canceled)
		assert.Less(t, time.Since(start), 2*time.Second)

		// net/http keeps dialing for a later request (the dial's context is detached
		// from the request's since Go 1.23); Close cancels it, and the connection that
		// arrives late is closed, not leaked.
		require.NoError(t, c.Close())
		close(unblock)
		require.Eventually(t, late.isClosed, 5*time.Second, 5*time.Millisecond)
	})

	t.Run("the dial honours its context", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			ctx     func() (context.Context, context.CancelFunc)
			is      error
			timeout bool
		}{
			{"cancelled", func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(30*time.Millisecond, cancel)
				return ctx, cancel
			}, context.Canceled, false},
			{"deadline", func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(t.Context(), 30*time.Millisecond)
			}, context.DeadlineExceeded, true},
			{"already done", func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx, cancel
			}, context.Canceled, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				unblock := make(chan struct{})
				d, late, started := hangingDialer(t, unblock)
				dial := sdkDial(d, "monky-tenancy", time.Minute, discard())
				ctx, cancel := tc.ctx()
				defer cancel()
				start := time.Now()
				conn, err := dial(ctx, "tcp", "ignored:443")
				require.Nil(t, conn)
				assert.Less(t, time.Since(start), 2*time.Second)
				require.ErrorIs(t, err, tc.is)
				require.ErrorIs(t, err, ErrUnreachable)
				assert.Equal(t, tc.timeout, errAs[*net.OpError](t, err).Timeout())
				close(unblock)
				select {
				case <-started: // dialed
					require.Eventually(t, late.isClosed, 5*time.Second, 5*time.Millisecond)
				default:
				}
			})
		}
	})

	t.Run("a dial that outlives the timeout is a network timeout", func(t *testing.T) {
		unblock := make(chan struct{})
		t.Cleanup(func() { close(unblock) })
		d := dialerFunc(func(string) (net.Conn, error) {
			<-unblock
			return nil, errors.New("too late")
		})
		c4 := cfg
		c4.Timeout = 100 * time.Millisecond
		c := openSDK(t, c4, d)
		_, err := get(t.Context(), t, c, base+"/")
		assert.True(t, errAs[*url.Error](t, err).Timeout())
		assert.True(t, errAs[net.Error](t, err).Timeout())
		require.ErrorIs(t, err, ErrUnreachable)
	})

	t.Run("a dial error surfaces as a network error naming the service", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			dialErr error
			is      []error
		}{
			{"plain error", errors.New("no edge routers connected in time"), []error{ErrUnreachable}},
			{"service not found", &Error{Kind: ErrServiceNotFound, Detail: "no Dial policy"}, []error{ErrServiceNotFound, ErrUnreachable}},
			{"controller", &Error{Kind: ErrController, Err: syscallRefused()}, []error{ErrController, ErrUnreachable}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := openSDK(t, cfg, dialerFunc(func(string) (net.Conn, error) { return nil, tc.dialErr }))
				_, err := get(t.Context(), t, c, base+"/")
				require.Error(t, err)
				op := errAs[*net.OpError](t, err)
				assert.Equal(t, "dial", op.Op)
				assert.Equal(t, "ziti", op.Net)
				assert.Equal(t, "monky-tenancy", op.Addr.String())
				for _, target := range tc.is {
					assert.ErrorIs(t, err, target)
				}
				assert.NotErrorIs(t, err, ErrInvalidConfig)
				te := errAs[*Error](t, err)
				assert.Equal(t, codes.Unavailable, te.Code())
				assert.True(t, te.Temporary())
				assert.True(t, op.Temporary())
				assert.Contains(t, err.Error(), `dial OpenZiti service "monky-tenancy"`)
			})
		}
	})

	t.Run("Close refuses new dials and leaves the caller's dialer open", func(t *testing.T) {
		d := &loopDialer{addr: ts.addr()}
		c, err := NewWithDialer(cfg, d)
		require.NoError(t, err)
		_, err = get(t.Context(), t, c, base+"/")
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.NoError(t, c.Close())
		_, err = get(t.Context(), t, c, base+"/")
		require.ErrorIs(t, err, ErrClosed)
		assert.False(t, errAs[*Error](t, err).Temporary())
		assert.False(t, d.closed.Load())
		assert.Equal(t, int32(1), d.dials.Load())
	})

	t.Run("nil dialer", func(t *testing.T) {
		_, err := NewWithDialer(cfg, nil)
		require.ErrorIs(t, err, ErrInvalidConfig)
	})

	t.Run("without service", func(t *testing.T) {
		c2 := cfg
		c2.Service = " "
		_, err := NewWithDialer(c2, &loopDialer{addr: ts.addr()})
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), "tenancy.service")
	})
}

func TestNewWithOwnedDialer(t *testing.T) {
	ts := newTenancyServer(t)
	base := "https://" + transporttest.TenancyName
	cfg := Config{Transport: TransportSystem, URL: base, Service: "monky-tenancy", CAFile: ts.CAFile, Timeout: 5 * time.Second}

	t.Run("Close closes the dialer", func(t *testing.T) {
		d := &loopDialer{addr: ts.addr()}
		c, err := NewWithOwnedDialer(cfg, func() (DialCloser, error) { return d, nil })
		require.NoError(t, err)
		assert.Equal(t, TransportSDK, c.Transport(), "the sdk transport, whatever cfg.Transport says")
		hello(t, ts, c, base+"/v1/agent/checkin")
		assert.False(t, d.closed.Load())
		require.NoError(t, c.Close())
		assert.True(t, d.closed.Load())
		require.NoError(t, c.Close())
	})

	t.Run("a config error comes first and opens nothing", func(t *testing.T) {
		c2 := cfg
		c2.Service = ""
		opened := false
		_, err := NewWithOwnedDialer(c2, func() (DialCloser, error) { opened = true; return &loopDialer{}, nil })
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), "tenancy.service")
		assert.False(t, opened)
	})

	t.Run("the error of open is returned", func(t *testing.T) {
		want := &Error{Kind: ErrIdentity, Key: "tenancy.identity", Detail: "not enrolled"}
		c, err := NewWithOwnedDialer(cfg, func() (DialCloser, error) { return nil, want })
		require.Nil(t, c)
		require.ErrorIs(t, err, ErrIdentity)
		assert.Same(t, want, err)
	})

	t.Run("no dialer", func(t *testing.T) {
		_, err := NewWithOwnedDialer(cfg, nil)
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = NewWithOwnedDialer(cfg, func() (DialCloser, error) { return nil, nil })
		require.ErrorIs(t, err, ErrInvalidConfig)
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// syscallRefused returns the *net.OpError of a refused loopback connection.
func syscallRefused() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = net.Dial("tcp", addr)
	return err
}

// trackedConn records Close.
type trackedConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *trackedConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func (c *trackedConn) isClosed() bool { return c.closed.Load() }

func TestSettings(t *testing.T) {
	ts := newTenancyServer(t)
	c := open(t, Config{Transport: TransportSystem, URL: "https://" + ts.addr(), CAFile: ts.CAFile, Timeout: 7 * time.Second})
	tr := c.HTTP.Transport.(*http.Transport)
	assert.Equal(t, 7*time.Second, tr.TLSHandshakeTimeout)
	assert.Equal(t, 7*time.Second, tr.ResponseHeaderTimeout)
	assert.Equal(t, expectContinueTimeout, tr.ExpectContinueTimeout)
	assert.Equal(t, idleConnTimeout, tr.IdleConnTimeout)
	assert.Equal(t, maxIdleConns, tr.MaxIdleConns)
	assert.Equal(t, uint16(tls.VersionTLS12), tr.TLSClientConfig.MinVersion)
	assert.Zero(t, c.HTTP.Timeout)

	d := open(t, Config{Transport: TransportSystem, URL: "https://" + ts.addr()})
	assert.Equal(t, DefaultTimeout, d.HTTP.Transport.(*http.Transport).ResponseHeaderTimeout)
}

// TestConfigErrors: a config New refuses names its key, before any other check. New
// does not build the sdk transport (this package does not link the SDK): its error
// says so, whatever else is set.
func TestConfigErrors(t *testing.T) {
	needsSDK := `transport: tenancy.transport: "sdk" needs the OpenZiti SDK, which this program does not link`
	for _, tc := range []struct {
		name string
		cfg  Config
		key  string
	}{
		{"sdk", Config{Transport: TransportSDK, URL: "https://t", Service: "s", Identity: "/etc/monky-deployd/identity.json"}, "tenancy.transport"},
		{"sdk and nothing else set", Config{Transport: TransportSDK}, "tenancy.transport"},
		{"unknown transport", Config{Transport: "carrier-pigeon", URL: "https://t"}, "tenancy.transport"},
		{"missing transport", Config{URL: "https://t"}, "tenancy.transport"},
		{"missing url", Config{Transport: TransportSystem}, "tenancy.url"},
		{"plain http to a remote host", Config{Transport: TransportSystem, URL: "http://tenancy.monky.internal"}, "tenancy.url"},
		{"ftp url", Config{Transport: TransportSystem, URL: "ftp://tenancy.monky.internal"}, "tenancy.url"},
		{"relative url", Config{Transport: TransportSystem, URL: "/v1"}, "tenancy.url"},
		{"user info in url", Config{Transport: TransportSystem, URL: "https://a:b@t"}, "tenancy.url"},
		{"query in url", Config{Transport: TransportSystem, URL: "https://t/?x=1"}, "tenancy.url"},
		{"proxy without proxy", Config{Transport: TransportProxy, URL: "https://t"}, "tenancy.proxy"},
		{"proxy without host", Config{Transport: TransportProxy, URL: "https://t", Proxy: "http://"}, "tenancy.proxy"},
		{"negative timeout", Config{Transport: TransportSystem, URL: "https://t", Timeout: -time.Second}, "tenancy.timeout"},
		{"server_name with a port", Config{Transport: TransportSystem, URL: "https://t", ServerName: "t:443"}, "tenancy.server_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(t.Context(), tc.cfg)
			require.Nil(t, c)
			if tc.cfg.Transport == TransportSDK {
				require.ErrorIs(t, err, ErrNeedsSDK)
				assert.NotErrorIs(t, err, ErrInvalidConfig)
				assert.Equal(t, needsSDK, err.Error())
			} else {
				require.ErrorIs(t, err, ErrInvalidConfig)
			}
			assert.Contains(t, err.Error(), tc.key)
			te := errAs[*Error](t, err)
			assert.Equal(t, tc.key, te.Key)
			assert.Empty(t, te.Code())
			assert.False(t, te.Temporary())
		})
	}

	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := New(ctx, Config{Transport: TransportSystem, URL: "https://t"})
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("localhost http is allowed", func(t *testing.T) {
		for _, u := range []string{"http://localhost:8080", "http://127.0.0.1:1", "http://[::1]:1"} {
			c, err := New(t.Context(), Config{Transport: TransportSystem, URL: u})
			require.NoError(t, err, u)
			require.NoError(t, c.Close())
		}
	})
}

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Kind: ErrCAFile, Key: "tenancy.ca_file", Path: "/etc/ca.pem", Detail: "no PEM certificate in the file"},
			"transport: tenancy.ca_file /etc/ca.pem: no PEM certificate in the file"},
		{&Error{Kind: ErrServiceNotFound, Service: "monky-tenancy", Detail: "no Dial policy", Err: errors.New("service 'monky-tenancy' not found")},
			`transport: dial OpenZiti service "monky-tenancy": no Dial policy: service 'monky-tenancy' not found`},
		{&Error{Kind: ErrClosed}, "transport: client closed"},
		{&Error{Kind: ErrUnreachable, Err: context.DeadlineExceeded}, "transport: tenancy unreachable: context deadline exceeded"},
		{&Error{Err: context.Canceled}, "transport: context canceled"}, // no Kind, head nor detail: no empty part (was "transport: : …")
	} {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.err.Error())
		})
	}
	assert.True(t, (&Error{Kind: ErrUnreachable, Err: context.DeadlineExceeded}).Is(ErrUnreachable))
	assert.False(t, (&Error{}).Is(ErrUnreachable))
	assert.True(t, strings.HasPrefix((&Error{Kind: ErrIdentity}).Error(), "transport: "))
}

func TestRedirects(t *testing.T) {
	ca := transporttest.NewCA(t)
	leaf, _, _ := ca.Issue(t, false, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	var addr string
	addr = transporttest.ServeTLS(t, leaf, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "https://elsewhere.example/v1/agent/bundles/x", http.StatusFound)
		case "/downgrade":
			http.Redirect(w, r, "http://"+addr+"/final", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "final")
		}
	}))
	base := "https://" + addr
	c := open(t, Config{Transport: TransportSystem, URL: base, CAFile: transporttest.WriteFile(t, "ca.pem", ca.PEM)})

	do := func(path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		require.NoError(t, err)
		return c.HTTP.Do(req)
	}
	t.Run("same origin is followed", func(t *testing.T) {
		resp, err := do("/same")
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "/final", resp.Request.URL.Path)
	})
	for _, path := range []string{"/away", "/downgrade"} {
		t.Run(path+" is returned, not followed", func(t *testing.T) {
			resp, err := do(path)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			assert.Equal(t, http.StatusFound, resp.StatusCode)
			assert.Equal(t, path, resp.Request.URL.Path)
		})
	}
	t.Run("a redirect loop stops", func(t *testing.T) {
		resp, err := do("/loop")
		if resp != nil {
			_ = resp.Body.Close()
		}
		require.ErrorContains(t, err, "stopped after 10 redirects")
	})
}
