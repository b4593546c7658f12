package transport

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/monky/monky-deployd/internal/fsutil"
)

// The values of Config.Transport (tenancy.transport).
const (
	// TransportSDK dials tenancy through the embedded OpenZiti SDK.
	TransportSDK = "sdk"
	// TransportProxy goes through the local tunneler's HTTP proxy.
	TransportProxy = "proxy"
	// TransportSystem dials tenancy directly over the host's network.
	TransportSystem = "system"
)

// DefaultTimeout is the Config.Timeout used when it is zero.
const DefaultTimeout = 30 * time.Second

// Fixed settings of every transport.
const (
	idleConnTimeout       = 90 * time.Second
	maxIdleConns          = 4
	expectContinueTimeout = time.Second
	tcpKeepAlive          = 30 * time.Second
	// maxCAFileSize bounds a ca_file; the Debian system bundle is about 220 KB.
	maxCAFileSize = 4 << 20
)

// Config is the tenancy block of the agent's config (docs/OPERATIONS.md, "The config") as this package needs it.
// The zero value of Timeout means DefaultTimeout and a nil Logger discards.
type Config struct {
	// Transport is "sdk", "proxy" or "system" (tenancy.transport).
	Transport string
	// URL is the tenancy base URL (tenancy.url). With sdk its host is the Host header
	// and the TLS SNI/verification name; the address is never resolved.
	URL string
	// Service is the OpenZiti service to dial (tenancy.service, sdk only).
	Service string
	// Identity is the OpenZiti identity JSON file (tenancy.identity, sdk only).
	Identity string
	// Proxy is the local tunneler's HTTP proxy URL (tenancy.proxy, proxy only):
	// CONNECT for an https URL, absolute-form requests for an http one.
	Proxy string
	// CAFile is an extra CA bundle (PEM), added to the system pool (tenancy.ca_file).
	CAFile string
	// ServerName overrides the TLS SNI and verification name (tenancy.server_name).
	ServerName string
	// Timeout bounds the dial, the TLS handshake and the wait for response headers,
	// each on its own (tenancy.timeout). Zero means DefaultTimeout.
	Timeout time.Duration
	// Logger receives the package's debug records; nil discards them.
	Logger *slog.Logger
}

// settings is a validated Config.
type settings struct {
	kind       string
	url        *url.URL
	service    string
	identity   string
	proxy      *url.URL
	serverName string
	timeout    time.Duration
	tls        *tls.Config
	log        *slog.Logger
}

func invalid(key, detail string) *Error {
	return &Error{Kind: ErrInvalidConfig, Key: key, Detail: detail}
}

// validate checks cfg for the transport it names and builds the TLS client config.
// It reads cfg.CAFile but nothing else from the disk and nothing from the environment.
func validate(cfg Config) (*settings, error) {
	s := &settings{kind: cfg.Transport, service: cfg.Service, identity: cfg.Identity, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Transport {
	case TransportSDK, TransportProxy, TransportSystem:
	case "":
		return nil, invalid("tenancy.transport", `missing: want "sdk", "proxy" or "system"`)
	default:
		return nil, invalid("tenancy.transport", fmt.Sprintf(`unknown transport %q: want "sdk", "proxy" or "system"`, cfg.Transport))
	}

	u, err := parseTenancyURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	s.url = u

	switch {
	case cfg.Timeout < 0:
		return nil, invalid("tenancy.timeout", fmt.Sprintf("negative timeout %s", cfg.Timeout))
	case cfg.Timeout == 0:
		s.timeout = DefaultTimeout
	default:
		s.timeout = cfg.Timeout
	}

	switch cfg.Transport {
	case TransportSDK:
		if strings.TrimSpace(cfg.Service) == "" {
			return nil, invalid("tenancy.service", "missing: the sdk transport needs the OpenZiti service to dial")
		}
	case TransportProxy:
		p, err := parseProxyURL(cfg.Proxy)
		if err != nil {
			return nil, err
		}
		s.proxy = p
	}

	if cfg.ServerName != "" {
		if strings.ContainsAny(cfg.ServerName, "/:@ \t") {
			return nil, invalid("tenancy.server_name", fmt.Sprintf("%q is not a host name", cfg.ServerName))
		}
		s.serverName = cfg.ServerName
	} else {
		s.serverName = u.Hostname()
	}

	pool, err := rootPool(cfg.CAFile, s.log)
	if err != nil {
		return nil, err
	}
	s.tls = &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		ServerName: s.serverName,
	}
	return s, nil
}

// parseTenancyURL accepts an absolute https URL, or an http URL whose host is a
// loopback address or "localhost" (a test fake, a local tunneler port). It carries no
// user info, query or fragment.
func parseTenancyURL(raw string) (*url.URL, error) {
	u, err := parseURL("tenancy.url", raw, "missing")
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, invalid("tenancy.url", "user info is not allowed in the URL (the bearer is the OpenBao token)")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, invalid("tenancy.url", fmt.Sprintf("%s has no host", u.Redacted()))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, invalid("tenancy.url", fmt.Sprintf("%s: a base URL has no query or fragment", u.Redacted()))
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return nil, invalid("tenancy.url", fmt.Sprintf("%s: plain http is only allowed to a loopback host; use https", u.Redacted()))
		}
	default:
		return nil, invalid("tenancy.url", fmt.Sprintf("%s: scheme %q, want https", u.Redacted(), u.Scheme))
	}
	return u, nil
}

// parseURL parses raw, the value of field; missing is the error's reason when raw
// is empty.
func parseURL(field, raw, missing string) (*url.URL, error) {
	if raw == "" {
		return nil, invalid(field, missing)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalid(field, "not a URL")
	}
	return u, nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseProxyURL accepts an http or https proxy URL with a host. Its user info, if
// any, is kept for the proxy but never printed.
func parseProxyURL(raw string) (*url.URL, error) {
	p, err := parseURL("tenancy.proxy", raw, "missing: the proxy transport needs the tunneler's HTTP proxy URL, e.g. http://127.0.0.1:8080")
	if err != nil {
		return nil, err
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return nil, invalid("tenancy.proxy", fmt.Sprintf("%s: scheme %q, want http or https", p.Redacted(), p.Scheme))
	}
	if p.Hostname() == "" {
		return nil, invalid("tenancy.proxy", fmt.Sprintf("%s has no host", p.Redacted()))
	}
	return p, nil
}

// rootPool returns the system pool with the certificates of caFile added, or nil (the
// system roots, which crypto/tls loads when a handshake needs them) without caFile.
func rootPool(caFile string, log *slog.Logger) (*x509.CertPool, error) {
	if caFile == "" {
		// nil RootCAs: crypto/tls loads the system roots itself, and only when a
		// handshake needs them, so a tick over plain loopback HTTP never pays for
		// them (about 40% of an idle tick; docs/BENCHMARKS.md).
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		log.Warn("transport: no system certificate pool; only tenancy.ca_file is trusted", "err", err)
		pool = x509.NewCertPool()
	}
	data, err := readCAFile(caFile)
	if err != nil {
		return nil, err
	}
	certs, err := parseCABundle(data)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Path = caFile
		}
		return nil, err
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func readCAFile(path string) ([]byte, error) {
	return ReadFile(ErrCAFile, "tenancy.ca_file", path, maxCAFileSize)
}

// ReadFile reads the file a config key names (tenancy.ca_file, tenancy.identity) with
// fsutil.ReadRegular: a regular file of at most max bytes, refused at once when it is
// a fifo or a device. A failure is an *Error of kind that names the key and the path,
// in fsutil.Problem's words; a missing file still matches fs.ErrNotExist.
func ReadFile(kind error, key, path string, max int64) ([]byte, error) {
	data, err := fsutil.ReadRegular(path, max)
	var pe *fs.PathError
	switch {
	case err == nil:
		return data, nil
	case errors.As(err, &pe):
		return nil, &Error{Kind: kind, Key: key, Path: path, Detail: "cannot read", Err: pe.Err}
	default:
		return nil, &Error{Kind: kind, Key: key, Path: path, Detail: fsutil.Problem(err)}
	}
}

// parseCABundle returns the certificates of a PEM bundle. Text outside PEM blocks is
// ignored (bundles carry comments); every block must be a CERTIFICATE that parses and
// at least one must be there. A block of another type (a private key put there by
// mistake) is refused, naming its position and type, never its content.
func parseCABundle(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, &Error{Kind: ErrCAFile, Key: "tenancy.ca_file",
				Detail: fmt.Sprintf("PEM block %d is %s, want CERTIFICATE", n, safeBlockType(block.Type))}
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, &Error{Kind: ErrCAFile, Key: "tenancy.ca_file",
				Detail: fmt.Sprintf("PEM block %d is not a valid X.509 certificate", n)}
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, &Error{Kind: ErrCAFile, Key: "tenancy.ca_file", Detail: "no PEM certificate in the file"}
	}
	return certs, nil
}

// safeBlockType quotes a PEM block type, bounded, so that a hostile file cannot put a
// long text into an error.
func safeBlockType(t string) string {
	const maxLen = 40
	if len(t) > maxLen {
		t = t[:maxLen] + "…"
	}
	return fmt.Sprintf("%q", t)
}
