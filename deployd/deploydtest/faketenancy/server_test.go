package faketenancy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/monky/monky-deployd/deployd/deploydtest"
	"github.com/monky/monky-deployd/deployd/deploydtest/fakestack"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
	"github.com/monky/monky-deployd/internal/testbox/testprog"
)

func newFake(t *testing.T, opts faketenancy.Options) (*faketenancy.Server, *faketenancy.MemoryAuthority) {
	t.Helper()
	auth := faketenancy.NewMemoryAuthority()
	opts.Authority = auth
	s := faketenancy.New(opts)
	t.Cleanup(s.Close)
	return s, auth
}

// target is StackTarget's over s alone, with the tokens of auth.
func target(s *faketenancy.Server, auth *faketenancy.MemoryAuthority) deploydtest.ConformanceTarget {
	tg := deploydtest.StackTarget(&fakestack.Stack{Tenancy: s}, "env-dev-01", "env-dev-02")
	tg.Token = func(_ testing.TB, env string) string { return auth.Token(env) }
	return tg
}

func TestConformance(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{})
	deploydtest.Conformance(t, target(s, auth))
}

func TestConformanceSmallBudget(t *testing.T) {
	s, auth := newFake(t, faketenancy.Options{LeaseBudget: 2, LeaseWindow: 10 * time.Minute})
	tg := target(s, auth)
	tg.LeaseBudget, tg.LeaseWindow = 2, 10*time.Minute
	deploydtest.Conformance(t, tg)
}

const mutationEnv = "FAKETENANCY_CONFORMANCE_MUTATION"

// mutations are broken variants of the fake; Conformance must fail on each, in the
// named subtest. This keeps the suite honest: a check that cannot fail shows up here.
var mutations = []struct {
	name, failing string
}{
	{"echo_bearer", "unauthenticated"},
	{"no_retry_after", "lease_budget"},
	{"report_200", "report"},
	{"mismatch_accepted", "env_mismatch"},
	{"no_budget", "lease_budget"},
	{"desired_ignored", "checkin"},
	{"live_forgotten", "live"},
	{"live_lax", "live"},
	{"live_strict", "live"},
	{"signature_forgotten", "signature"},
}

func TestConformanceCatchesBrokenServers(t *testing.T) {
	testprog.SkipIfShort(t) // spawns the test binary
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenTarget$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), mutationEnv+"="+m.name)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "Conformance passed a server broken by %s:\n%s", m.name, out)
			assert.Contains(t, string(out), "--- FAIL: TestBrokenTarget/"+m.failing+" ", "%s", out)
		})
	}
}

// TestBrokenTarget is the helper process of TestConformanceCatchesBrokenServers: it
// runs Conformance against the mutation named in the environment, and does nothing
// when run as part of the normal suite.
func TestBrokenTarget(t *testing.T) {
	mutation := os.Getenv(mutationEnv)
	if mutation == "" {
		return
	}
	opts := faketenancy.Options{}
	if mutation == "no_budget" {
		opts.LeaseBudget = 1000
	}
	s, auth := newFake(t, opts)
	h := s.Handler()
	switch mutation {
	case "echo_bearer":
		s.SetFaults(faketenancy.Faults{EchoBearer: true})
	case "no_retry_after", "report_200", "mismatch_accepted", "live_lax":
		h = rewrite(h, mutation)
	case "live_forgotten", "live_strict":
		h = liveMutation(h, mutation)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tg := target(s, auth)
	tg.BaseURL = srv.URL
	switch mutation {
	case "desired_ignored":
		tg.SetDesired = func(testing.TB, string, faketenancy.Desired) {}
	case "signature_forgotten":
		tg.PublishSignature = func(testing.TB, string, string, []byte) {}
	}
	deploydtest.Conformance(t, tg)
}

func rewrite(h http.Handler, mutation string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&rewriter{ResponseWriter: w, mutation: mutation, path: r.URL.Path}, r)
	})
}

// liveMutation breaks the fake's handling of a check-in's live object: live_forgotten
// drops it before the fake sees it, as a server that does not keep it would;
// live_strict refuses a live object with a field the fake does not know.
func liveMutation(h http.Handler, mutation string) http.Handler {
	known := map[string]bool{"observed_at": true, "healthy": true, "reason": true, "services": true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/agent/checkin" {
			var body map[string]json.RawMessage
			data, _ := io.ReadAll(r.Body)
			if json.Unmarshal(data, &body) == nil {
				var live map[string]json.RawMessage
				if mutation == "live_strict" && json.Unmarshal(body["live"], &live) == nil {
					for k := range live {
						if !known[k] {
							w.Header().Set("Content-Type", "application/json")
							w.WriteHeader(http.StatusBadRequest)
							_, _ = io.WriteString(w, `{"error":{"code":"BAD_REQUEST","message":"unknown field live.`+k+`"}}`)
							return
						}
					}
				}
				if mutation == "live_forgotten" {
					delete(body, "live")
					data, _ = json.Marshal(body)
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(data))
			r.ContentLength = int64(len(data))
		}
		h.ServeHTTP(w, r)
	})
}

type rewriter struct {
	http.ResponseWriter
	mutation, path string
}

func (rw *rewriter) WriteHeader(status int) {
	switch {
	case rw.mutation == "no_retry_after":
		rw.Header().Del("Retry-After")
	case rw.mutation == "report_200" && status == http.StatusNoContent:
		status = http.StatusOK
	case rw.mutation == "mismatch_accepted" && status == http.StatusConflict:
		status = http.StatusOK
	case rw.mutation == "live_lax" && rw.path == "/v1/agent/checkin" && status == http.StatusBadRequest:
		status = http.StatusOK
	}
	rw.ResponseWriter.WriteHeader(status)
}
