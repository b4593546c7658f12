package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/monky/monky-deployd/internal/jsonerr"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"time"
)

// Defaults of Options.
const (
	// DefaultHost is the daemon's address of the default context without DOCKER_HOST.
	DefaultHost = "unix:///var/run/docker.sock"
	// DefaultTimeout bounds each request when Options.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBody bounds each response body when Options.MaxBody is zero.
	DefaultMaxBody = 16 << 20
)

// Options configure a Client. The zero value is ready to use.
type Options struct {
	// Logger receives a debug record per request and an info record per removed
	// image; nil discards.
	Logger *slog.Logger
	// Timeout bounds each request, from the dial to the last byte of the body. If
	// zero, DefaultTimeout is used.
	Timeout time.Duration
	// MaxBody is the largest response body read, in bytes; a larger one is an error.
	// If zero, DefaultMaxBody is used.
	MaxBody int64
}

// Client is a client of one docker daemon. It is safe for concurrent use.
type Client struct {
	ep      Endpoint
	host    string // ep.Host, e.g. unix:///var/run/docker.sock
	base    string // scheme and authority of the request URLs
	tr      *http.Transport
	http    *http.Client
	log     *slog.Logger
	timeout time.Duration
	maxBody int64
}

// New returns a client of the daemon that env describes ("K=V", as deployd.DockerEnv
// returns it; the last of a repeated name wins), found as the docker CLI finds it
// (Resolve: DOCKER_HOST, DOCKER_CONTEXT, then the CLI configuration's currentContext).
// It dials nothing: an unreachable daemon shows on the first call. An endpoint the
// client cannot speak to matches ErrUnsupported; negative options are an error.
func New(env []string, opts Options) (*Client, error) {
	if opts.Timeout < 0 || opts.MaxBody < 0 {
		return nil, &Error{Op: "new", Err: errors.New("Options.Timeout and Options.MaxBody must not be negative")}
	}
	ep, err := Resolve(env)
	if err != nil {
		return nil, err
	}
	c := &Client{ep: ep, host: ep.Host, log: opts.Logger, timeout: opts.Timeout, maxBody: opts.MaxBody}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxBody
	}
	dialer := &net.Dialer{Timeout: c.timeout}
	c.tr = &http.Transport{
		Proxy: nil, // never a proxy from the environment
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, ep.network, ep.addr)
		},
		MaxIdleConns:        4,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	c.http = &http.Client{Transport: c.tr}
	if ep.network == "unix" {
		c.base = "http://docker"
	} else {
		c.base = "http://" + ep.addr
	}
	return c, nil
}

// Host returns the daemon's address, e.g. "unix:///var/run/docker.sock" or
// "tcp://127.0.0.1:2375".
func (c *Client) Host() string { return c.host }

// Endpoint returns the daemon's endpoint and what selected it.
func (c *Client) Endpoint() Endpoint { return c.ep }

// Close closes the client's idle connections. A call after Close opens a new one.
func (c *Client) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// do sends one request and returns the body of a 2xx answer; any other answer is an
// *Error with the status and the daemon's message.
func (c *Client) do(ctx context.Context, op, method, path string, query url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	fail := func(status int, msg string, err error) error {
		return &Error{Op: op, Host: c.host, Path: path, Status: status, Message: msg, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fail(0, "", err)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fail(0, "", transportErr(ctx, err, c.timeout))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	c.log.DebugContext(ctx, "docker engine request", "op", op, "method", method, "path", path,
		"status", resp.StatusCode, "bytes", len(body), "duration", time.Since(start))
	if err != nil {
		return nil, fail(resp.StatusCode, "", fmt.Errorf("reading the answer: %w", transportErr(ctx, err, c.timeout)))
	}
	if int64(len(body)) > c.maxBody {
		return nil, fail(resp.StatusCode, "", fmt.Errorf("the answer is larger than %d bytes (Options.MaxBody)", c.maxBody))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fail(resp.StatusCode, daemonMessage(body), nil)
	}
	return body, nil
}

// transportErr names what went wrong with a request that got no complete answer: a
// failed dial is ErrUnreachable, an expired context ErrTimeout.
func transportErr(ctx context.Context, err error, timeout time.Duration) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: %w", ErrUnreachable, op)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: no complete answer within %s or before the caller's deadline: %w", ErrTimeout, timeout, ctx.Err())
	}
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// getJSON sends a GET and decodes the answer into v.
func (c *Client) getJSON(ctx context.Context, op, path string, query url.Values, v any) error {
	body, err := c.do(ctx, op, http.MethodGet, path, query)
	if err != nil {
		return err
	}
	if err := jsonUnmarshal(body, v); err != nil {
		return &Error{Op: op, Host: c.host, Path: path, Err: err}
	}
	return nil
}

// jsonUnmarshal decodes data into v; its error is jsonErr's.
func jsonUnmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the answer is empty")
	}
	return jsonErr(err)
}

// jsonErr keeps the position and the kind of a JSON decoding error but none of the
// input, which may hold label or environment values.
func jsonErr(err error) error { return errors.New(jsonerr.Describe(err)) }

// Version returns the daemon's version, e.g. "20.10.24+dfsg1" (GET /version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"Version"`
	}
	if err := c.getJSON(ctx, "version", "/version", nil, &v); err != nil {
		return "", err
	}
	if v.Version == "" {
		return "", &Error{Op: "version", Host: c.host, Path: "/version", Err: errors.New("the answer has no Version")}
	}
	return v.Version, nil
}

// DataRoot returns the directory where the daemon keeps its images and containers
// (GET /info, DockerRootDir), e.g. "/var/lib/docker".
func (c *Client) DataRoot(ctx context.Context) (string, error) {
	var v struct {
		DockerRootDir string `json:"DockerRootDir"`
	}
	if err := c.getJSON(ctx, "info", "/info", nil, &v); err != nil {
		return "", err
	}
	if v.DockerRootDir == "" || !filepath.IsAbs(v.DockerRootDir) {
		return "", &Error{Op: "info", Host: c.host, Path: "/info", Err: errors.New("the answer has no absolute DockerRootDir")}
	}
	return v.DockerRootDir, nil
}
