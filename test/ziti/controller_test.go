package zitimesh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openziti/sdk-golang/ziti"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// What the controller tells about the sessions of the identities, read from its event
// log: the controller has no counter of authentications, but every API session it
// issues is an event of the "apiSession" namespace (controller/event/api_session.go,
// ziti v1.7.2). With OIDC, as the SDK authenticates against v1.7.2, an authentication
// with the identity's certificate is an event "created" of type "jwt", and each use of
// the refresh token an event "refreshed" or "exchanged" (the SDK renews its tokens by
// a token exchange of the refresh token); a legacy (non-OIDC) session is "created" too.
// The "authentication" namespace reports the failures of a certificate login (its
// success is only reported for updb and ext-jwt logins, so it cannot count them).

// ctrlEvent is one line of the controller's JSON event log, the fields used here.
type ctrlEvent struct {
	Namespace  string    `json:"namespace"`
	EventType  string    `json:"event_type"`
	Type       string    `json:"type"` // apiSession: jwt or legacy; authentication: the method
	IdentityID string    `json:"identity_id"`
	Timestamp  time.Time `json:"timestamp"`
	Reason     string    `json:"reason"`
	// Circuits.
	ServiceID string `json:"service_id"`
	CircuitID string `json:"circuit_id"`
}

// controllerEvents configures the controller (ctrl.yaml of the quickstart's home) to
// write its apiSession, authentication and circuit events as JSON lines to path.
func controllerEvents(path string) func(map[string]any) {
	return func(c map[string]any) {
		events, _ := c["events"].(map[string]any)
		if events == nil {
			events = map[string]any{}
		}
		events["monkyMeter"] = map[string]any{
			"subscriptions": []any{
				map[string]any{"type": "apiSession"},
				map[string]any{"type": "authentication"},
				map[string]any{"type": "circuit"},
			},
			"handler": map[string]any{"type": "file", "format": "json", "path": path},
		}
		c["events"] = events
	}
}

// accessTokenLifetime sets the lifetime of the controller's OIDC access tokens, which
// is the API session's: the SDK refreshes it ten seconds before it ends. The
// controller's minimum is one minute, its default 30 minutes. (Its
// refreshTokenDuration key overwrites the access-token lifetime in v1.7.2
// (config_edge.go), so the refresh token keeps its 24 hours.)
func accessTokenLifetime(d time.Duration) func(map[string]any) {
	return func(c map[string]any) {
		edge, ok := c["edge"].(map[string]any)
		if !ok {
			panic("ctrl.yaml has no edge section")
		}
		oidc, _ := edge["oidc"].(map[string]any)
		if oidc == nil {
			oidc = map[string]any{}
		}
		oidc["accessTokenDuration"] = d.String()
		edge["oidc"] = oidc
	}
}

// reconfigure stops the quickstart, applies the edits to its controller config and
// starts it again on the same home, database and ports.
func (m *mesh) reconfigure(tb testing.TB, edits ...func(map[string]any)) {
	tb.Helper()
	m.stop()
	path := filepath.Join(m.home, "ctrl.yaml")
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	var c map[string]any
	require.NoError(tb, yaml.Unmarshal(data, &c), "ctrl.yaml")
	for _, edit := range edits {
		edit(c)
	}
	out, err := yaml.Marshal(c)
	require.NoError(tb, err)
	require.NoError(tb, os.WriteFile(path, out, 0o600))
	m.launch(tb)
}

// identityID returns the controller's id of the identity called name.
func (m *mesh) identityID(tb testing.TB, name string) string {
	tb.Helper()
	return m.idOf(tb, "identities", "identity", name)
}

// serviceID returns the controller's id of the service called name.
func (m *mesh) serviceID(tb testing.TB, name string) string {
	tb.Helper()
	return m.idOf(tb, "services", "service", name)
}

// idOf returns the controller's id of the one entity of the list (identities,
// services) called name; kind names it in the failures.
func (m *mesh) idOf(tb testing.TB, list, kind, name string) string {
	tb.Helper()
	data := m.list(tb, list, fmt.Sprintf(`name="%s"`, name))
	require.Len(tb, data, 1, "%s %s", kind, name)
	id, _ := data[0]["id"].(string)
	require.NotEmpty(tb, id, "%s %s has no id", kind, name)
	return id
}

// readEvents returns the complete lines of the controller's event log (the file
// handler writes a record and its newline in two writes).
func readEvents(tb testing.TB, path string) []ctrlEvent {
	tb.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(tb, err)
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		return nil
	}
	var out []ctrlEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var e ctrlEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a record of another namespace with other field types
		}
		out = append(out, e)
	}
	return out
}

// sessionTally counts the API-session events of one identity.
type sessionTally struct {
	Created, Refreshed, Exchanged, Deleted, AuthFailed int
	// Renewals counts the renewals of the API session: "refreshed" and "exchanged"
	// events (sdk-golang v1.2.10 renews by exchanging its refresh token; after an
	// outage a dial that met 401 and the refresh goroutine may each renew, seconds
	// apart).
	Renewals int
	Types    map[string]int // jwt, legacy
	// LastIssued is the time of the last "created", "refreshed" or "exchanged": the
	// start of the current access token's life.
	LastIssued time.Time
}

// tally counts the events of identity at or after since.
func tally(events []ctrlEvent, identity string, since time.Time) sessionTally {
	t := sessionTally{Types: map[string]int{}}
	for _, e := range events {
		if e.IdentityID != identity || e.Timestamp.Before(since) {
			continue
		}
		switch e.Namespace {
		case "apiSession":
			t.Types[e.Type]++
			switch e.EventType {
			case "created":
				t.Created++
				t.LastIssued = e.Timestamp
			case "refreshed":
				t.Refreshed++
				t.Renewals++
				t.LastIssued = e.Timestamp
			case "exchanged":
				t.Exchanged++
				t.Renewals++
				t.LastIssued = e.Timestamp
			case "deleted":
				t.Deleted++
			}
		case "authentication":
			if e.EventType == "fail" {
				t.AuthFailed++
			}
		}
	}
	return t
}

func (t sessionTally) String() string {
	return fmt.Sprintf("authentications (API sessions created) %d, renewals %d (refreshed %d, exchanged %d), deleted %d, failed logins %d, types %v",
		t.Created, t.Renewals, t.Refreshed, t.Exchanged, t.Deleted, t.AuthFailed, t.Types)
}

// circuits counts the circuits created for service at or after since.
func circuits(events []ctrlEvent, service string, since time.Time) int {
	n := 0
	for _, e := range events {
		if e.Namespace == "circuit" && e.EventType == "created" && e.ServiceID == service && !e.Timestamp.Before(since) {
			n++
		}
	}
	return n
}

// prober reaches the tenancy host through the mesh from this process, with an identity
// of its own: a dial of the service and a TLS handshake with the host, no request to
// the fake tenancy. It tells whether the mesh and the host are up, apart from the agent.
type prober struct {
	zctx ziti.Context
	tls  *tls.Config
}

func newProber(tb testing.TB, w *world, identity string) *prober {
	tb.Helper()
	cfg, err := ziti.NewConfigFromFile(w.ids[identity])
	require.NoError(tb, err)
	zctx, err := ziti.NewContext(cfg)
	require.NoError(tb, err)
	tb.Cleanup(zctx.Close)
	pem, err := os.ReadFile(w.caFile)
	require.NoError(tb, err)
	pool := x509.NewCertPool()
	require.True(tb, pool.AppendCertsFromPEM(pem))
	return &prober{zctx: zctx, tls: &tls.Config{RootCAs: pool, ServerName: tenancyName, MinVersion: tls.VersionTLS12}}
}

// probe dials the service once and shakes hands with the host.
func (p *prober) probe() error {
	conn, err := p.zctx.DialWithOptions(tenancyService, &ziti.DialOptions{ConnectTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	tc := tls.Client(conn, p.tls)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tc.HandshakeContext(ctx)
}

// wait probes until a probe succeeds, for at most d.
func (p *prober) wait(tb testing.TB, d time.Duration, what string) {
	tb.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = p.probe(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("%s: the tenancy host is not reachable through the mesh within %s: %v", what, d, err)
}

// why is a diagnostic for a failure message: whether a probe gets through now.
func (p *prober) why() string {
	if err := p.probe(); err != nil {
		return "a probe from the test process fails too: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "a probe from the test process gets through, so the mesh and the tenancy host are up"
}
