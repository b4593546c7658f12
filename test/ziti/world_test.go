package zitimesh

import (
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openziti/sdk-golang/ziti"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// Names of the OpenZiti network the tests build.
const (
	tenancyService = "monky-tenancy"
	tenancyHostID  = "tenancy-host"
	boxID          = "box-01"     // Dial policy through #boxes
	loopBoxID      = "box-loop"   // Dial policy through #boxes; used by the loop test alone
	noDialBoxID    = "box-nodial" // enrolled, but no Dial policy names it
	tenancyName    = "tenancy.monky.internal"
	envID          = "env-dev-01"
)

// world is a mesh with the tenancy service hosted on it, and the fakes behind it.
type world struct {
	mesh *mesh
	bao  *fakebao.Server
	ten  *faketenancy.Server

	// ids maps an identity name to its enrolled identity JSON file.
	ids map[string]string
	// caFile is the PEM of the CA that signed the tenancy host's TLS certificate.
	caFile string
	// tcpURL is the fake tenancy on plain loopback HTTP, for the system transport.
	tcpURL string
	// meshHits and tcpHits count the requests that reached the fake tenancy through
	// the OpenZiti service and through loopback TCP.
	meshHits, tcpHits *countingHandler
}

// newWorld builds a world in dir: the quickstart, the identities, the service and its
// policies, the fakes, and the fake tenancy hosted on the service through the SDK (with
// TLS for tenancy.monky.internal) and also on loopback TCP. Everything is stopped by
// tb.Cleanup.
func newWorld(tb testing.TB, zitiBin, dir string) *world {
	tb.Helper()
	start := time.Now()
	m := startMesh(tb, zitiBin, dir)
	tb.Logf("mesh up in %s (controller %s, router port %d)", time.Since(start).Round(time.Millisecond), m.ctrl, m.router)

	w := &world{mesh: m, ids: map[string]string{}}
	w.ids[tenancyHostID] = m.identity(tb, tenancyHostID, "tenancy-hosts")
	w.ids[boxID] = m.identity(tb, boxID, "boxes")
	w.ids[loopBoxID] = m.identity(tb, loopBoxID, "boxes")
	w.ids[noDialBoxID] = m.identity(tb, noDialBoxID)
	m.cli(tb, "edge", "create", "service", tenancyService, "--role-attributes", "tenancy")
	// The quickstart already made the edge-router policy (#all identities on #public
	// routers) and the service-edge-router policy (#all services on #all routers).
	m.cli(tb, "edge", "create", "service-policy", "tenancy-bind", "Bind",
		"--service-roles", "@"+tenancyService, "--identity-roles", "#tenancy-hosts")
	m.cli(tb, "edge", "create", "service-policy", "tenancy-dial", "Dial",
		"--service-roles", "@"+tenancyService, "--identity-roles", "#boxes")

	w.bao = fakebao.New(fakebao.Options{})
	tb.Cleanup(w.bao.Close)
	// A next_checkin_s of 1 lets the loop test tick every second.
	w.ten = faketenancy.NewUnstarted(faketenancy.Options{Authority: w.bao, NextCheckin: time.Second})
	w.meshHits = &countingHandler{next: w.ten.Handler()}
	w.tcpHits = &countingHandler{next: w.ten.Handler()}

	ca, leaf := tlsPair(tb, tenancyName)
	w.caFile = filepath.Join(dir, "tenancy-ca.pem")
	require.NoError(tb, os.WriteFile(w.caFile, ca, 0o644))

	w.host(tb, leaf)
	m.waitTerminator(tb, tenancyService)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	tcp := &http.Server{Handler: w.tcpHits, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = tcp.Serve(ln) }()
	tb.Cleanup(func() { _ = tcp.Close() })
	w.tcpURL = "http://" + ln.Addr().String()
	tb.Logf("world ready in %s", time.Since(start).Round(time.Millisecond))
	return w
}

// host binds the tenancy service with the tenancy host's identity and serves the fake
// tenancy on it over TLS.
func (w *world) host(tb testing.TB, leaf tls.Certificate) {
	tb.Helper()
	// The SDK of the tenancy host logs through this process's logrus: into a file, so
	// that the test output stays readable (it also carries the host's session tokens).
	hostLog, err := os.Create(filepath.Join(w.mesh.home, "tenancy-host.log"))
	require.NoError(tb, err)
	sdkLog.add(hostLog)
	tb.Cleanup(func() { sdkLog.remove(hostLog); _ = hostLog.Close() })
	cfg, err := ziti.NewConfigFromFile(w.ids[tenancyHostID])
	require.NoError(tb, err)
	zctx, err := ziti.NewContext(cfg)
	require.NoError(tb, err)
	ln, err := zctx.Listen(tenancyService)
	require.NoError(tb, err, "bind %s", tenancyService)
	tlsLn := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12})
	// The server's own complaints (a TLS handshake cut short by a dial that was given
	// up) go to the same file.
	srv := &http.Server{Handler: w.meshHits, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(hostLog, "tenancy-host: ", log.LstdFlags)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tlsLn) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			tb.Logf("tenancy host stopped: %v", err)
		}
		zctx.Close()
	})
}

// sdkLog is the output of the process-global logrus logger, which the OpenZiti SDK
// logs through: the tenancy-host.log of every world alive (tests that run in parallel
// each have one; the SDK's records then reach all of them), or nowhere.
var sdkLog = func() *fanout {
	f := &fanout{files: map[*os.File]bool{}}
	logrus.SetOutput(f)
	return f
}()

// fanout writes to a changing set of files.
type fanout struct {
	mu    sync.Mutex
	files map[*os.File]bool
}

func (f *fanout) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for file := range f.files {
		_, _ = file.Write(p)
	}
	return len(p), nil
}

func (f *fanout) add(file *os.File) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[file] = true
}

func (f *fanout) remove(file *os.File) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, file)
}

// tlsPair makes a CA and a server certificate for name signed by it. It returns the
// CA's PEM and the server's key pair.
func tlsPair(tb testing.TB, name string) ([]byte, tls.Certificate) {
	tb.Helper()
	ca := transporttest.NewCA(tb)
	cert, _, _ := ca.Issue(tb, false, []string{name}, nil)
	return ca.PEM, cert
}
