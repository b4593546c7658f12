package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tenancyName is the name the test server's certificate is issued for.
const tenancyName = "tenancy.monky.internal"

// testCA is a throw-away certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "monky test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate for the DNS names and IPs given, as a tls.Certificate
// and as PEM (certificate, key).
func (ca *testCA) issue(t testing.TB, client bool, names []string, ips []net.IP) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "leaf"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     names,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	tc, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return tc, certPEM, keyPEM
}

// writeFile writes data to name in a fresh temp dir and returns the path.
func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// seen is what a test tenancy server observed for one request.
type seen struct {
	Host       string
	SNI        string
	RemoteAddr string
	RequestURI string
}

// tenancyServer is a TLS server on loopback with a certificate for tenancyName only
// (not for 127.0.0.1), recording the SNI of each handshake and the Host of each request.
type tenancyServer struct {
	*httptest.Server
	CA     *testCA
	CAFile string

	mu   sync.Mutex
	sni  map[string]string // remote addr → SNI
	reqs []seen
	// handle, when set, runs before the reply (e.g. a barrier).
	handle func(w http.ResponseWriter, r *http.Request)
}

func newTenancyServer(t testing.TB) *tenancyServer {
	t.Helper()
	ca := newTestCA(t)
	leaf, _, _ := ca.issue(t, false, []string{tenancyName}, nil)
	ts := &tenancyServer{CA: ca, sni: map[string]string{}}
	ts.Server = httptest.NewUnstartedServer(http.HandlerFunc(ts.serve))
	ts.TLS = &tls.Config{
		Certificates: []tls.Certificate{leaf},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			ts.mu.Lock()
			ts.sni[h.Conn.RemoteAddr().String()] = h.ServerName
			ts.mu.Unlock()
			return nil, nil
		},
	}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	ts.StartTLS()
	t.Cleanup(ts.Close)
	ts.CAFile = writeFile(t, "ca.pem", ca.pem)
	return ts
}

func (ts *tenancyServer) serve(w http.ResponseWriter, r *http.Request) {
	ts.mu.Lock()
	ts.reqs = append(ts.reqs, seen{Host: r.Host, SNI: ts.sni[r.RemoteAddr], RemoteAddr: r.RemoteAddr, RequestURI: r.RequestURI})
	handle := ts.handle
	ts.mu.Unlock()
	if handle != nil {
		handle(w, r)
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("tenancy says hello"))
}

func (ts *tenancyServer) requests() []seen {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]seen(nil), ts.reqs...)
}

// addr is the loopback host:port of the server.
func (ts *tenancyServer) addr() string { return ts.Listener.Addr().String() }
