// Package transporttest holds the test helpers of internal/transport, its
// zititransport and test/ziti: a throw-away certificate authority, files in temporary
// directories, a TLS server on loopback, the check of every broken fixture file's
// error, fuzz seeds and a GET (their golden files are internal/testbox/golden's). Only
// tests import it.
package transporttest

import (
	"context"
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
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/testbox/golden"
)

// FileErrors runs a subtest, named for the fixture, for every testdata/<dir>/*<ext>
// file of the test package (there must be one): open's error of the fixture must be
// of kind, name the config key and the fixture's path, never carry secret, and read as
// the golden file <dir>/<name>.golden with the path written <path>.
func FileErrors(t *testing.T, dir, ext string, kind error, key, secret string, open func(t *testing.T, path string) error) {
	t.Helper()
	fixtures, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	require.NoError(t, err)
	require.NotEmpty(t, fixtures)
	for _, p := range fixtures {
		name := strings.TrimSuffix(filepath.Base(p), ext)
		t.Run(name, func(t *testing.T) {
			err := open(t, p)
			require.ErrorIs(t, err, kind)
			msg := err.Error()
			assert.Contains(t, msg, key)
			assert.Contains(t, msg, p)
			assert.NotContains(t, msg, secret)
			golden.Assert(t, dir+"/"+name+".golden", []byte(strings.ReplaceAll(msg, p, "<path>")+"\n"))
		})
	}
}

// SeedFiles adds every file matching glob under the test package's testdata to f's
// corpus.
func SeedFiles(f *testing.F, glob string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", glob))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// TenancyName is the name the test tenancy servers' certificates are issued for.
const TenancyName = "tenancy.monky.internal"

// ServeTLS serves h over TLS with leaf on loopback until the test ends and returns its
// address; the server's own log is discarded.
func ServeTLS(t testing.TB, leaf tls.Certificate, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// CA is a throw-away certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

// NewCA makes a CA valid from an hour ago for a day.
func NewCA(t testing.TB) *CA {
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
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue returns a leaf certificate (for a client when client is true) for the DNS names and IPs given, as a tls.Certificate
// and as PEM (certificate, key).
func (ca *CA) Issue(t testing.TB, client bool, names []string, ips []net.IP) (tls.Certificate, []byte, []byte) {
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

// WriteFile writes data to name in a fresh temp dir and returns the path.
func WriteFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// Get does a GET of rawURL with c and returns the body; it fails t unless the
// answer is 200. The error is the request's.
func Get(ctx context.Context, t *testing.T, c *http.Client, rawURL string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(b), nil
}
