package zititransport

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/internal/transport"
	"github.com/monky/monky-deployd/internal/transport/transporttest"
)

// secretMarker is planted in every broken fixture's key; no error may carry it.
const secretMarker = "KEYMATERIAL"

func TestIdentityFileErrors(t *testing.T) {
	transporttest.FileErrors(t, "identity", ".json", transport.ErrIdentity, "tenancy.identity", secretMarker,
		func(t *testing.T, p string) error {
			c, err := New(t.Context(), transport.Config{Transport: transport.TransportSDK, URL: "https://t", Service: "monky-tenancy", Identity: p})
			require.Nil(t, c)
			return err
		})

	t.Run("missing file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "identity.json")
		_, err := New(t.Context(), transport.Config{Transport: transport.TransportSDK, URL: "https://t", Service: "s", Identity: p})
		require.ErrorIs(t, err, transport.ErrIdentity)
		require.ErrorIs(t, err, fs.ErrNotExist)
		assert.Equal(t, "transport: tenancy.identity "+p+": cannot read: no such file or directory", err.Error())
	})

	t.Run("a fifo is refused at once, not waited on", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "identity.json")
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		_, err := New(t.Context(), transport.Config{Transport: transport.TransportSDK, URL: "https://t", Service: "s", Identity: p})
		require.ErrorIs(t, err, transport.ErrIdentity)
		assert.Equal(t, "transport: tenancy.identity "+p+": cannot read: a fifo, not a regular file", err.Error())
	})

	t.Run("key of another certificate", func(t *testing.T) {
		ca := transporttest.NewCA(t)
		_, certPEM, _ := ca.Issue(t, true, nil, nil)
		_, _, otherKey := ca.Issue(t, true, nil, nil)
		p := writeIdentity(t, "https://127.0.0.1:1/edge/client/v1", certPEM, otherKey, ca.PEM)
		_, err := New(t.Context(), transport.Config{Transport: transport.TransportSDK, URL: "https://t", Service: "s", Identity: p})
		require.ErrorIs(t, err, transport.ErrIdentity)
		assert.Equal(t, "transport: tenancy.identity "+p+": id.key does not belong to the certificate of id.cert", err.Error())
		assert.NotContains(t, err.Error(), "PRIVATE KEY")
	})

	t.Run("certificate that is not PEM", func(t *testing.T) {
		ca := transporttest.NewCA(t)
		_, _, keyPEM := ca.Issue(t, true, nil, nil)
		p := writeIdentity(t, "https://127.0.0.1:1/edge/client/v1", []byte("not a cert"), keyPEM, ca.PEM)
		_, err := New(t.Context(), transport.Config{Transport: transport.TransportSDK, URL: "https://t", Service: "s", Identity: p})
		require.ErrorIs(t, err, transport.ErrIdentity)
		assert.Contains(t, err.Error(), "id.cert (inline PEM) is not a usable certificate")
	})
}

// writeIdentity writes an OpenZiti identity file with inline PEM values, the form that
// enrollment writes.
func writeIdentity(t testing.TB, ztAPI string, cert, key, ca []byte) string {
	t.Helper()
	doc := map[string]any{
		"ztAPI": ztAPI,
		"id": map[string]string{
			"cert": "pem:" + string(cert),
			"key":  "pem:" + string(key),
			"ca":   "pem:" + string(ca),
		},
		"configTypes": []string{},
	}
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	return transporttest.WriteFile(t, "identity.json", data)
}

// goroutines returns the stacks of every goroutine of the process.
func goroutines(t testing.TB) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 2))
	return b.String()
}

// stacksWith counts the goroutines whose stack mentions needle.
func stacksWith(t testing.TB, needle string) int {
	n := 0
	for _, g := range strings.Split(goroutines(t), "\n\n") {
		if strings.Contains(g, needle) {
			n++
		}
	}
	return n
}

// fakeController is an OpenZiti controller on loopback that refuses every
// authentication with the edge API's 401 envelope.
func fakeController(t *testing.T, ca *transporttest.CA) (url string, hits func() int) {
	t.Helper()
	leaf, _, _ := ca.Issue(t, false, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	var n atomic.Int32
	srv := transporttest.ServeTLS(t, leaf, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"INVALID_AUTH","message":"The authentication request failed","requestId":"r1"},"meta":{"apiVersion":"0.0.0","apiEnrollmentVersion":"0.0.0"}}`))
	}))
	return "https://" + srv + "/edge/client/v1", func() int { return int(n.Load()) }
}

// checkinThroughSDK makes a client of the sdk transport whose identity, issued by ca,
// names the controller at ctrl, and GETs tenancy's check-in through it. It returns
// the client, for the test to Close, the identity's key, for a test to look for in
// the error, and the error of the GET.
func checkinThroughSDK(t *testing.T, ca *transporttest.CA, ctrl string) (c *transport.Client, keyPEM []byte, err error) {
	t.Helper()
	_, certPEM, keyPEM := ca.Issue(t, true, nil, nil)
	p := writeIdentity(t, ctrl, certPEM, keyPEM, ca.PEM)
	c, err = New(t.Context(), transport.Config{Transport: transport.TransportSDK, URL: "https://" + transporttest.TenancyName, Service: "monky-tenancy", Identity: p, Timeout: 10 * time.Second})
	require.NoError(t, err)
	_, err = get(t.Context(), t, c, "https://"+transporttest.TenancyName+"/v1/agent/checkin")
	return c, keyPEM, err
}

func TestZitiDialerWithTheSDK(t *testing.T) {
	t.Run("controller unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		closedAddr := ln.Addr().String()
		require.NoError(t, ln.Close())

		c, _, err := checkinThroughSDK(t, transporttest.NewCA(t), "https://"+closedAddr+"/edge/client/v1")
		require.ErrorIs(t, err, transport.ErrController)
		require.ErrorIs(t, err, transport.ErrUnreachable)
		var op *net.OpError
		require.ErrorAs(t, err, &op)
		assert.True(t, op.Temporary())
		assert.Contains(t, err.Error(), "connection refused")
		assert.Contains(t, err.Error(), `dial OpenZiti service "monky-tenancy"`)
		require.NoError(t, c.Close())
	})

	t.Run("controller refuses the identity; Close leaves no goroutine behind", func(t *testing.T) {
		ca := transporttest.NewCA(t)
		ctrl, hits := fakeController(t, ca)

		c, keyPEM, err := checkinThroughSDK(t, ca, ctrl)
		require.ErrorIs(t, err, transport.ErrController)
		t.Logf("error: %v", err)
		assert.NotContains(t, err.Error(), "PRIVATE KEY")
		assert.NotContains(t, err.Error(), string(keyPEM[40:80]))
		assert.Positive(t, hits(), "the SDK never reached the fake controller")

		// The SDK keeps its controller connection alive; its own Close does not end it.
		require.Positive(t, stacksWith(t, "net/http.(*persistConn).readLoop"))
		require.NoError(t, c.Close())
		require.Eventually(t, func() bool {
			return stacksWith(t, "net/http.(*persistConn).readLoop") == 0 && stacksWith(t, "openziti") == 0
		}, 5*time.Second, 20*time.Millisecond, "goroutines left after Close:\n%s", goroutines(t))
	})
}

// TestZitiIdentitiesEnvTrap pins the SDK behaviour the package doc warns about: the
// init of package ziti loads every identity named in ZITI_IDENTITIES, before main, so
// any binary linking this package dies at start on a broken identity there, whatever
// transport it uses. If the SDK stops doing so, this test fails and the warning (and
// the unit's UnsetEnvironment=ZITI_IDENTITIES) can go.
func TestZitiIdentitiesEnvTrap(t *testing.T) {
	bad, err := filepath.Abs(filepath.Join("testdata", "identity", "inline-key-garbage.json"))
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ZITI_IDENTITIES="+bad)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child ran to completion:\n%s", out)
	assert.Contains(t, string(out), "ziti.NewSdkCollectionFromEnv")
}

// authenticatingController is an OpenZiti controller on loopback that accepts the
// identity and lists no service: the shape of an identity without a Dial policy.
func authenticatingController(t *testing.T, ca *transporttest.CA) (url string, paths func() []string) {
	t.Helper()
	leaf, _, _ := ca.Issue(t, false, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	var mu sync.Mutex
	var seen []string
	now, hour := time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	session := `{"data":{"id":"apisession-1","token":"api-session-token","identityId":"identity-1",
		"identity":{"id":"identity-1","name":"box-01","entity":"identities","_links":{}},
		"expiresAt":"` + hour + `","expirationSeconds":3600,"createdAt":"` + now + `","updatedAt":"` + now + `",
		"lastActivityAt":"` + now + `","cachedLastActivityAt":"` + now + `","authQueries":[],"configTypes":[],"isMfaComplete":true,
		"isMfaRequired":false,"authenticatorId":"auth-1","tags":{},"_links":{}},"meta":{}}`
	services := `{"data":[],"meta":{"pagination":{"limit":500,"offset":0,"totalCount":0}}}`
	srv := transporttest.ServeTLS(t, leaf, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/edge/client/v1/authenticate":
			_, _ = io.WriteString(w, session)
		case "/edge/client/v1/services":
			_, _ = io.WriteString(w, services)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"NOT_FOUND","message":"not found"},"meta":{}}`)
		}
	}))
	return "https://" + srv + "/edge/client/v1", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestZitiDialerServiceNotFound(t *testing.T) {
	ca := transporttest.NewCA(t)
	ctrl, paths := authenticatingController(t, ca)

	c, _, err := checkinThroughSDK(t, ca, ctrl)
	t.Logf("controller saw %v; error: %v", paths(), err)
	require.ErrorIs(t, err, transport.ErrServiceNotFound, "%v", err)
	require.ErrorIs(t, err, transport.ErrUnreachable)
	assert.NotErrorIs(t, err, transport.ErrController)
	assert.Contains(t, paths(), "GET /edge/client/v1/services")

	require.Positive(t, stacksWith(t, "openziti"), "the authenticated context runs its refresh goroutine")
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		return stacksWith(t, "net/http.(*persistConn).readLoop") == 0 && stacksWith(t, "openziti") == 0
	}, 5*time.Second, 20*time.Millisecond, "goroutines left after Close:\n%s", goroutines(t))
}
