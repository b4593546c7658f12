package zititransport

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/openziti/identity"
	edgeapis "github.com/openziti/sdk-golang/edge-apis"
	"github.com/openziti/sdk-golang/ziti"

	"github.com/monky/monky-deployd/internal/transport"
)

// maxIdentityFileSize bounds an identity file; a real one is a few KB.
const maxIdentityFileSize = 1 << 20

// ZitiDialer dials OpenZiti services through one ziti.Context created from an identity
// file. It is what New uses for the sdk transport; a long-running caller can keep one
// across ticks (so that the controller session and the edge-router channels are reused)
// and give it to transport.NewWithDialer.
type ZitiDialer struct {
	zctx    ziti.Context
	timeout time.Duration
	log     *slog.Logger

	closeOnce sync.Once
	// authMu makes concurrent first dials authenticate once.
	authMu sync.Mutex
}

// NewZitiDialer loads cfg.Identity and creates the OpenZiti context; cfg.Timeout (zero:
// transport.DefaultTimeout) becomes the SDK's connect timeout. No network I/O happens here: the
// first Dial authenticates with the controller. ctx is checked before and after the
// load (which may involve a key engine) and not kept.
//
// The identity is loaded and checked here, not by the SDK: the SDK's lazy loader ends
// the process (logrus Fatal) on a bad key or certificate, and its error texts may
// echo key material. Controller requests never use a proxy from the environment.
func NewZitiDialer(ctx context.Context, cfg transport.Config) (*ZitiDialer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Identity == "" {
		return nil, &transport.Error{Kind: transport.ErrInvalidConfig, Key: "tenancy.identity",
			Detail: "missing: the sdk transport needs the OpenZiti identity file"}
	}
	timeout := cfg.Timeout
	if timeout < 0 {
		return nil, &transport.Error{Kind: transport.ErrInvalidConfig, Key: "tenancy.timeout",
			Detail: fmt.Sprintf("negative timeout %s", timeout)}
	}
	if timeout == 0 {
		timeout = transport.DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	data, err := readIdentityFile(cfg.Identity)
	if err != nil {
		return nil, err
	}
	zcfg, err := parseIdentity(data)
	if err != nil {
		return nil, identityPath(err, cfg.Identity)
	}
	id, err := loadIdentity(zcfg.ID)
	if err != nil {
		return nil, identityPath(err, cfg.Identity)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	creds := edgeapis.NewIdentityCredentials(id)
	creds.ConfigTypes = zcfg.ConfigTypes
	zcfg.Credentials = creds
	// The SDK would use http.ProxyFromEnvironment for the controller: never.
	zcfg.CtrlProxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	zcfg.RouterProxy = nil

	zctx, err := ziti.NewContext(zcfg)
	if err != nil {
		// NewContext only fails on a controller URL it cannot parse; parseIdentity
		// checked them, so this is unexpected. The SDK text names the URL only.
		return nil, &transport.Error{Kind: transport.ErrIdentity, Key: "tenancy.identity", Path: cfg.Identity,
			Detail: "the OpenZiti SDK refused the identity", Err: err}
	}
	log.Debug("transport: OpenZiti identity loaded", "identity", cfg.Identity, "controller", controllerHost(zcfg))
	return &ZitiDialer{zctx: zctx, timeout: timeout, log: log}, nil
}

// Dial opens a connection to service. Without an API session it first authenticates
// with the controller, so that a failure there is reported as transport.ErrController
// with its real cause (the SDK's own Dial flattens it into a string). A failed dial is
// transport.ErrServiceNotFound when the identity cannot see the service (it does not
// exist or no Dial policy grants it) and transport.ErrUnreachable otherwise. Every
// error is a *transport.Error.
func (z *ZitiDialer) Dial(service string) (net.Conn, error) {
	if err := z.ensureSession(); err != nil {
		// Error.Timeout finds a timeout in Err.
		return nil, &transport.Error{Kind: transport.ErrController, Service: service,
			Detail: "cannot authenticate with the OpenZiti controller", Err: err}
	}
	conn, err := z.zctx.DialWithOptions(service, &ziti.DialOptions{ConnectTimeout: z.timeout})
	if err != nil {
		if _, found := z.zctx.GetService(service); !found {
			return nil, &transport.Error{Kind: transport.ErrServiceNotFound, Service: service,
				Detail: "the identity sees no such service (missing, or no Dial policy)", Err: err}
		}
		return nil, &transport.Error{Kind: transport.ErrUnreachable, Service: service, Err: err}
	}
	return conn, nil
}

// ensureSession authenticates with the controller when the context has no API
// session; concurrent callers wait for one attempt.
func (z *ZitiDialer) ensureSession() error {
	impl, ok := z.zctx.(*ziti.ContextImpl)
	if !ok {
		return nil // another implementation: its Dial authenticates
	}
	z.authMu.Lock()
	defer z.authMu.Unlock()
	if impl.CtrlClt.GetCurrentApiSession() != nil {
		return nil
	}
	return z.zctx.Authenticate()
}

// Close closes the OpenZiti context: its refresh goroutine, its edge-router channels
// (and so every connection dialed through it) and the idle HTTP connections to the
// controller, which the SDK's own Close leaves open. The controller's API session is
// not deleted (the SDK has no call for it); it expires on the controller. Idempotent.
func (z *ZitiDialer) Close() error {
	z.closeOnce.Do(func() {
		z.zctx.Close()
		if impl, ok := z.zctx.(*ziti.ContextImpl); ok && impl.CtrlClt != nil && impl.CtrlClt.ClientApiClient != nil {
			if t := impl.CtrlClt.HttpTransport; t != nil {
				t.CloseIdleConnections()
			}
		}
	})
	return nil
}

func controllerHost(c *ziti.Config) string {
	if u, err := url.Parse(c.ZtAPI); err == nil {
		return u.Host
	}
	return ""
}

func identityErr(detail string) *transport.Error {
	return &transport.Error{Kind: transport.ErrIdentity, Key: "tenancy.identity", Detail: detail}
}

// identityPath sets the path on an identity *Error.
func identityPath(err error, path string) error {
	var e *transport.Error
	if errors.As(err, &e) {
		e.Path = path
	}
	return err
}

func readIdentityFile(path string) ([]byte, error) {
	return transport.ReadFile(transport.ErrIdentity, "tenancy.identity", path, maxIdentityFileSize)
}

// parseIdentity decodes an OpenZiti identity file (the JSON that enrollment writes:
// ztAPI or ztAPIs, id.cert, id.key, id.ca, configTypes) and checks its shape. Its
// errors name fields and positions, never a value: a JSON error of the standard
// library can quote a piece of the input, so none is passed on.
func parseIdentity(data []byte) (*ziti.Config, error) {
	var c ziti.Config
	if err := json.Unmarshal(data, &c); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, identityErr(fmt.Sprintf("not valid JSON (byte offset %d)", syn.Offset))
		case errors.As(err, &typ):
			return nil, identityErr(fmt.Sprintf("field %s has the wrong type (a JSON %s)", boundField(typ.Field), typ.Value))
		default:
			return nil, identityErr("not a JSON object of an OpenZiti identity")
		}
	}
	if c.ZtAPI == "" && len(c.ZtAPIs) > 0 {
		// The SDK builds its controller list from ztAPI even when only ztAPIs is set
		// (ziti/contexts.go, v1.2.10); the others are learnt from the controller.
		c.ZtAPI = c.ZtAPIs[0]
	}
	if c.ZtAPI == "" {
		return nil, identityErr("no controller: ztAPI and ztAPIs are empty")
	}
	for i, api := range append([]string{c.ZtAPI}, c.ZtAPIs...) {
		u, err := url.Parse(api)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			field := "ztAPI"
			if i > 0 {
				field = fmt.Sprintf("ztAPIs[%d]", i-1)
			}
			return nil, identityErr(fmt.Sprintf("%s is not an https URL of the controller", field))
		}
	}
	switch {
	case strings.TrimSpace(c.ID.Cert) == "":
		return nil, identityErr("id.cert is empty (not enrolled?)")
	case strings.TrimSpace(c.ID.Key) == "":
		return nil, identityErr("id.key is empty (not enrolled?)")
	}
	return &c, nil
}

// boundField bounds a JSON field path taken from the input.
func boundField(f string) string {
	const maxLen = 60
	if f == "" {
		return "(top level)"
	}
	if len(f) > maxLen {
		f = f[:maxLen] + "…"
	}
	return fmt.Sprintf("%q", f)
}

// loadIdentity loads the key, certificate and CA bundle of id. On failure it loads
// the parts one by one to name the one at fault; the loader's own error text is never
// used, as it can quote the key address (and so the key itself when it is inline).
// The loader panics on a key that is not PEM (certtools.LoadPrivateKey dereferences
// the nil block of pem.Decode, identity v1.0.116); such a panic is a bad id.key here.
func loadIdentity(id identity.Config) (identity.Identity, error) {
	loaded, err := recovered(func() (identity.Identity, error) { return identity.LoadIdentity(id) })
	if err == nil {
		if err := keyMatchesCert(loaded.Cert()); err != nil {
			return nil, err
		}
		return loaded, nil
	}
	if _, kerr := recovered(func() (crypto.PrivateKey, error) { return identity.LoadKey(id.Key) }); kerr != nil {
		return nil, identityErr(fmt.Sprintf("id.key (%s) is not a usable private key", addressScheme(id.Key)))
	}
	if _, cerr := recovered(func() ([]*x509.Certificate, error) { return identity.LoadCert(id.Cert) }); cerr != nil {
		return nil, identityErr(fmt.Sprintf("id.cert (%s) is not a usable certificate", addressScheme(id.Cert)))
	}
	if id.CA != "" {
		if _, caErr := recovered(func() ([]*x509.Certificate, error) { return identity.LoadCert(id.CA) }); caErr != nil {
			return nil, identityErr(fmt.Sprintf("id.ca (%s) is not a usable CA bundle", addressScheme(id.CA)))
		}
	}
	return nil, identityErr("id.cert, id.key and id.ca do not form a usable identity")
}

// errLoaderPanic stands for a panic of the identity loader.
var errLoaderPanic = errors.New("the identity loader panicked")

// recovered runs load and turns a panic into errLoaderPanic. The panic value is
// dropped: it may hold part of the key.
func recovered[T any](load func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, errLoaderPanic
		}
	}()
	return load()
}

// keyMatchesCert checks that the identity's private key belongs to its certificate
// (the SDK does not; the controller would refuse the TLS handshake).
func keyMatchesCert(c *tls.Certificate) error {
	if c == nil || c.Leaf == nil {
		return identityErr("id.cert holds no certificate")
	}
	signer, ok := c.PrivateKey.(crypto.Signer)
	if !ok {
		return identityErr("id.key is not a signing key")
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(c.Leaf.PublicKey) {
		return identityErr("id.key does not belong to the certificate of id.cert")
	}
	return nil
}

// addressScheme describes how an identity field gives its value ("pem", "file",
// "engine", …) without its content.
func addressScheme(addr string) string {
	switch {
	case strings.HasPrefix(addr, "pem:"), strings.HasPrefix(addr, "-----BEGIN"):
		return "inline PEM"
	case strings.HasPrefix(addr, "file:"):
		return "file"
	case strings.HasPrefix(addr, "engine:"):
		return "key engine"
	case strings.HasPrefix(addr, "/"):
		return "file"
	}
	return "unrecognised form"
}
