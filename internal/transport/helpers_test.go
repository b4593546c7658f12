package transport

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// seen is what a test tenancy server observed for one request.
type seen struct {
	Host       string
	SNI        string
	RemoteAddr string
	RequestURI string
}

// tenancyServer is a TLS server on loopback with a certificate for transporttest.TenancyName only
// (not for 127.0.0.1), recording the SNI of each handshake and the Host of each request.
type tenancyServer struct {
	*httptest.Server
	CA     *transporttest.CA
	CAFile string

	mu   sync.Mutex
	sni  map[string]string // remote addr → SNI
	reqs []seen
	// handle, when set, runs before the reply (e.g. a barrier).
	handle func(w http.ResponseWriter, r *http.Request)
}

func newTenancyServer(t testing.TB) *tenancyServer {
	t.Helper()
	ca := transporttest.NewCA(t)
	leaf, _, _ := ca.Issue(t, false, []string{transporttest.TenancyName}, nil)
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
	ts.CAFile = transporttest.WriteFile(t, "ca.pem", ca.PEM)
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
