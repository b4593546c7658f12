package tenancy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/tenancy"
)

// checkinCapture is a tenancy that answers every check-in with none and keeps the
// bodies it received.
type checkinCapture struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *checkinCapture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, data)
	c.mu.Unlock()
	_, _ = io.WriteString(w, `{"action":"none","next_checkin_s":60}`)
}

func (c *checkinCapture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bodies)
}

// sendCheckin posts ci (EnvID and AgentVersion filled in) to a capturing server. A
// refused check-in returns the error, and must have sent nothing; a sent one must
// be one body, returned as its keys.
func sendCheckin(t *testing.T, ci tenancy.Checkin) (map[string]json.RawMessage, error) {
	t.Helper()
	rec := &checkinCapture{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	ci.EnvID, ci.AgentVersion = env, "0.1.0"
	_, err := client(t, srv.URL, "tok", nil, nil).Checkin(t.Context(), ci)
	if err != nil {
		assert.Zero(t, rec.count(), "nothing is sent")
		return nil, err
	}
	require.Equal(t, 1, rec.count())
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.bodies[0], &body))
	return body, nil
}

// sendLive posts a check-in carrying live and returns the body's live object as raw
// JSON, nil when the body has no "live" key.
func sendLive(t *testing.T, live *tenancy.Live) json.RawMessage {
	t.Helper()
	body, err := sendCheckin(t, tenancy.Checkin{Live: live})
	require.NoError(t, err)
	return body["live"]
}

func TestCheckinLiveCaps(t *testing.T) {
	at := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	decode := func(t *testing.T, raw json.RawMessage) (reason string, services []tenancy.LiveService) {
		t.Helper()
		var l struct {
			Reason   string                `json:"reason"`
			Services []tenancy.LiveService `json:"services"`
		}
		require.NoError(t, json.Unmarshal(raw, &l))
		return l.Reason, l.Services
	}
	t.Run("long_reason", func(t *testing.T) {
		// "é" is two bytes: the cut lands inside one unless it moves to a boundary.
		reason, _ := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Reason: "x" + strings.Repeat("é", 600)}))
		assert.LessOrEqual(t, len(reason), tenancy.MaxLiveReason)
		assert.Greater(t, len(reason), tenancy.MaxLiveReason-len(tenancy.LiveCut)-2, "the head is kept, not dropped")
		assert.True(t, utf8.ValidString(reason))
		assert.True(t, strings.HasPrefix(reason, "xéé"))
		assert.True(t, strings.HasSuffix(reason, tenancy.LiveCut))
	})
	t.Run("reason_at_the_cap", func(t *testing.T) {
		in := strings.Repeat("r", tenancy.MaxLiveReason)
		reason, _ := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Reason: in}))
		assert.Equal(t, in, reason, "a reason within the cap is sent whole")
	})
	t.Run("invalid_utf8_reason", func(t *testing.T) {
		reason, _ := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Reason: "bad \xff byte"}))
		assert.Equal(t, "bad \uFFFD byte", reason)
	})
	t.Run("many_services", func(t *testing.T) {
		in := make([]tenancy.LiveService, tenancy.MaxLiveServices+44)
		for i := range in {
			in[i] = tenancy.LiveService{Name: "svc-" + fmt.Sprintf("%04d", i), State: "running"}
		}
		live := &tenancy.Live{ObservedAt: at, Healthy: true, Services: in}
		_, got := decode(t, sendLive(t, live))
		require.Len(t, got, tenancy.MaxLiveServices)
		assert.Equal(t, in[:tenancy.MaxLiveServices], got, "the first ones are sent, in order")
		assert.Len(t, live.Services, tenancy.MaxLiveServices+44, "the caller's slice is left alone")
	})
	t.Run("worst_case_size", func(t *testing.T) {
		long := strings.Repeat("w", 4096)
		in := make([]tenancy.LiveService, 1000)
		for i := range in {
			in[i] = tenancy.LiveService{Name: long, State: long, Health: long, ExitCode: math.MinInt64, Restarts: math.MaxInt64}
		}
		raw := sendLive(t, &tenancy.Live{ObservedAt: at.Add(123456789), Healthy: true, Services: in})
		assert.LessOrEqual(t, len(raw), 125<<10, "the documented bound of a live object with printable fields")
		t.Logf("worst-case live object: %d bytes", len(raw))
	})
	t.Run("long_fields", func(t *testing.T) {
		name := strings.Repeat("n", tenancy.MaxLiveField-1) + "ü" // the cap cuts ü in two
		in := tenancy.LiveService{Name: name, State: strings.Repeat("s", 300), Health: "healthy"}
		_, got := decode(t, sendLive(t, &tenancy.Live{ObservedAt: at, Healthy: true, Services: []tenancy.LiveService{in}}))
		require.Len(t, got, 1)
		assert.Equal(t, strings.Repeat("n", tenancy.MaxLiveField-1), got[0].Name)
		assert.Equal(t, strings.Repeat("s", tenancy.MaxLiveField), got[0].State)
		assert.Equal(t, "healthy", got[0].Health)
	})
}

// TestCheckinOptionalObjects: the live and deferred objects travel as docs/PROTOCOL.md
// says, with no key when nil, and one the agent must not send is refused naming its
// field.
func TestCheckinOptionalObjects(t *testing.T) {
	at := time.Date(2026, 3, 4, 11, 22, 33, 500_000_000, time.FixedZone("CET", 3600))
	utc := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	sha, since := strings.Repeat("ab", 32), time.Date(2026, 12, 4, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	live := func(l tenancy.Live) tenancy.Checkin { return tenancy.Checkin{Live: &l} }
	deferred := func(d tenancy.Deferred) tenancy.Checkin { return tenancy.Checkin{Deferred: &d} }
	tests := []struct {
		name    string
		ci      tenancy.Checkin
		key     string // the object's key in the body; "": neither is there
		want    string
		wantErr string
	}{
		{name: "nothing_live_nothing_deferred"},
		{name: "healthy", ci: live(tenancy.Live{ObservedAt: at, Healthy: true, Services: []tenancy.LiveService{
			{Name: "app", State: "running", Health: "healthy"},
		}}), key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","healthy":true,
			"services":[{"name":"app","state":"running","health":"healthy","exit_code":0,"restarts":0}]}`},
		{name: "unhealthy_with_services", ci: live(tenancy.Live{ObservedAt: at, Services: []tenancy.LiveService{
			{Name: "app", State: "restarting", Health: "unhealthy", ExitCode: 137, Restarts: 12},
			{Name: "db", State: "missing"},
		}}), key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","healthy":false,"services":[
			{"name":"app","state":"restarting","health":"unhealthy","exit_code":137,"restarts":12},
			{"name":"db","state":"missing","health":"","exit_code":0,"restarts":0}]}`},
		{name: "reason_alone", ci: live(tenancy.Live{ObservedAt: at, Healthy: true, Reason: "docker: Cannot connect to the Docker daemon"}),
			key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","reason":"docker: Cannot connect to the Docker daemon"}`},
		{name: "nil_services_as_empty_list", ci: live(tenancy.Live{ObservedAt: at, Healthy: true}),
			key: "live", want: `{"observed_at":"2026-03-04T10:22:33.5Z","healthy":true,"services":[]}`},
		{name: "whole_seconds_in_utc", ci: live(tenancy.Live{ObservedAt: utc, Healthy: true}),
			key: "live", want: `{"observed_at":"2026-03-04T10:00:00Z","healthy":true,"services":[]}`},
		{name: "live reason_and_services", ci: live(tenancy.Live{ObservedAt: utc, Reason: "docker: timeout",
			Services: []tenancy.LiveService{{Name: "app", State: "running"}}}), wantErr: "live.reason and live.services"},
		{name: "live service_without_name", ci: live(tenancy.Live{ObservedAt: utc, Healthy: true,
			Services: []tenancy.LiveService{{Name: "app", State: "running"}, {State: "running"}}}), wantErr: "live.services[1].name"},
		{name: "live no_observed_at", ci: live(tenancy.Live{Healthy: true}), wantErr: "live.observed_at"},
		{name: "live negative_restarts", ci: live(tenancy.Live{ObservedAt: utc, Services: []tenancy.LiveService{{Name: "app", Restarts: -1}}}),
			wantErr: "live.services[0].restarts"},
		{name: "hold", ci: deferred(tenancy.Deferred{Why: "hold", Owner: "alice", Reason: "demo at 3", Until: since.Add(2 * time.Hour),
			SHA: sha, Serial: 4, Since: since, Prepared: true}), key: "deferred",
			want: `{"why":"hold","owner":"alice","reason":"demo at 3","until":"2026-12-04T14:00:00Z","sha":"` + sha + `","serial":4,"since":"2026-12-04T12:00:00Z","prepared":true}`},
		{name: "window", ci: deferred(tenancy.Deferred{Why: "window", Until: since, SHA: sha, Serial: 1, Since: since}), key: "deferred",
			want: `{"why":"window","until":"2026-12-04T12:00:00Z","sha":"` + sha + `","serial":1,"since":"2026-12-04T12:00:00Z","prepared":false}`},
		{name: "a long reason is cut", ci: deferred(tenancy.Deferred{Why: "hold", Owner: "a", Reason: strings.Repeat("é", 150), SHA: sha, Serial: 1, Since: since}), key: "deferred",
			want: `{"why":"hold","owner":"a","reason":"` + strings.Repeat("é", 100) + `","sha":"` + sha + `","serial":1,"since":"2026-12-04T12:00:00Z","prepared":false}`},
		{name: "bad why", ci: deferred(tenancy.Deferred{Why: "lunch", SHA: sha, Serial: 1, Since: since}), wantErr: "deferred.why"},
		{name: "bad sha", ci: deferred(tenancy.Deferred{Why: "hold", SHA: "x", Serial: 1, Since: since}), wantErr: "deferred.sha"},
		{name: "no serial", ci: deferred(tenancy.Deferred{Why: "hold", SHA: sha, Since: since}), wantErr: "deferred.serial"},
		{name: "no since", ci: deferred(tenancy.Deferred{Why: "hold", SHA: sha, Serial: 1}), wantErr: "deferred.since"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := sendCheckin(t, tt.ci)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, tenancy.ErrInvalidArgument)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.key == "" {
				assert.NotContains(t, body, "live")
				assert.NotContains(t, body, "deferred")
				return
			}
			assert.JSONEq(t, tt.want, string(body[tt.key]))
		})
	}
}
