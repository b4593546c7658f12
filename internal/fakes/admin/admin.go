package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/monky/monky-deployd/deployd/deploydtest/fakebao"
	"github.com/monky/monky-deployd/deployd/deploydtest/faketenancy"
)

// maxBundle bounds an uploaded bundle.
const maxBundle = 256 << 20

// Faults is the fault document of GET/PUT /faults.
type Faults struct {
	// LeaseShape … TruncateBundle are the tenancy faults (faketenancy.Faults), with
	// durations in seconds and milliseconds.
	LeaseShape     string         `json:"lease_shape"`
	LeaseBudget    int            `json:"lease_budget"`
	Status         map[string]int `json:"status"`
	RetryAfterS    int64          `json:"retry_after_s"`
	DelayMS        map[string]int `json:"delay_ms"`
	EchoBearer     bool           `json:"echo_bearer"`
	TruncateBundle bool           `json:"truncate_bundle"`
	// Sealed seals the fake OpenBao.
	Sealed bool `json:"sealed"`
	// LoginFault is the fake OpenBao's login fault (fakebao.Fault*).
	LoginFault string `json:"login_fault"`
	// TokenTTLS > 0 sets the TTL of OpenBao tokens issued or renewed from now on.
	TokenTTLS int64 `json:"token_ttl_s"`
}

// Request is one request to either fake, for GET /requests.
type Request struct {
	// Service is "tenancy" or "bao".
	Service string `json:"service"`
	// Method, Path, EnvID (tenancy only), Status and Time as the fake recorded them.
	Method string    `json:"method"`
	Path   string    `json:"path"`
	EnvID  string    `json:"env_id,omitempty"`
	Status int       `json:"status"`
	Time   time.Time `json:"time"`
}

// API serves the admin API over a fake tenancy and a fake OpenBao.
type API struct {
	tenancy *faketenancy.Server
	bao     *fakebao.Server
	log     *slog.Logger
	mux     *http.ServeMux

	mu       sync.Mutex
	baoFault Faults // the OpenBao half of the last PUT /faults
}

// New returns the admin API over t and b; logger nil discards.
func New(t *faketenancy.Server, b *fakebao.Server, logger *slog.Logger) *API {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &API{tenancy: t, bao: b, log: logger, mux: http.NewServeMux()}
	a.mux.HandleFunc("POST /envs/{env}/bundles", a.publish)
	a.mux.HandleFunc("PUT /envs/{env}/bundles/{sha}/signature", a.publishSignature)
	a.mux.HandleFunc("PUT /envs/{env}/desired", a.desired)
	a.mux.HandleFunc("POST /envs/{env}/grants", a.grant)
	a.mux.HandleFunc("POST /envs/{env}/tokens", a.token)
	a.mux.HandleFunc("DELETE /envs/{env}/tokens", a.invalidate)
	a.mux.HandleFunc("PUT /envs/{env}/secrets/{path...}", a.putSecret)
	a.mux.HandleFunc("DELETE /envs/{env}/secrets/{path...}", a.deleteSecret)
	a.mux.HandleFunc("GET /envs/{env}/reports", list(a.tenancy.Reports))
	a.mux.HandleFunc("GET /envs/{env}/reports/{n}", a.waitReport)
	a.mux.HandleFunc("GET /envs/{env}/checkins", list(a.tenancy.Checkins))
	a.mux.HandleFunc("GET /envs/{env}/live", latest(a.tenancy.LastLive, "live", "nothing is live"))
	a.mux.HandleFunc("GET /envs/{env}/condition", latest(a.tenancy.LastCondition, "condition", "its last run ended 0"))
	a.mux.HandleFunc("GET /envs/{env}/deferred", latest(a.tenancy.LastDeferred, "deferred", "nothing waits on the box"))
	a.mux.HandleFunc("GET /envs/{env}/leases", list(a.tenancy.Leases))
	a.mux.HandleFunc("GET /requests", a.requests)
	a.mux.HandleFunc("GET /faults", a.getFaults)
	a.mux.HandleFunc("PUT /faults", a.putFaults)
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "no admin call "+r.Method+" "+r.URL.Path)
	})
	return a
}

// ServeHTTP serves the admin API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

func (a *API) publish(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBundle+1))
	if err != nil || len(data) > maxBundle {
		fail(w, http.StatusBadRequest, fmt.Sprintf("the bundle must be at most %d bytes", maxBundle))
		return
	}
	sha, serial, err := a.tenancy.PublishBundle(r.PathValue("env"), data)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	reply(w, http.StatusOK, map[string]any{"sha": sha, "serial": serial})
}

// publishSignature stores the body, byte for byte, as the signature of a bundle
// published for env (faketenancy.Server.PublishSignature).
func (a *API) publishSignature(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxSignature+1))
	if err != nil || len(data) > maxSignature {
		fail(w, http.StatusBadRequest, fmt.Sprintf("the signature must be at most %d bytes", maxSignature))
		return
	}
	if err := a.tenancy.PublishSignature(r.PathValue("env"), r.PathValue("sha"), data); err != nil {
		fail(w, http.StatusNotFound, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxSignature bounds a signature the admin API takes: larger than the agent reads
// (4096 bytes), so that a test can publish one the agent must refuse.
const maxSignature = 64 << 10

func (a *API) desired(w http.ResponseWriter, r *http.Request) {
	var d faketenancy.Desired
	if !decode(w, r, &d) {
		return
	}
	switch d.Action {
	case "apply", "none", "down":
	default:
		fail(w, http.StatusBadRequest, "action must be apply, none or down")
		return
	}
	a.tenancy.SetDesired(r.PathValue("env"), d)
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) grant(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusOK, map[string]string{"grant": a.bao.MintGrant(r.PathValue("env"))})
}

func (a *API) token(w http.ResponseWriter, r *http.Request) {
	tok, err := Login(r.Context(), http.DefaultClient, a.bao.URL(), a.bao.MintGrant(r.PathValue("env")))
	if err != nil {
		fail(w, http.StatusBadGateway, err.Error())
		return
	}
	reply(w, http.StatusOK, map[string]string{"token": tok})
}

func (a *API) invalidate(w http.ResponseWriter, r *http.Request) {
	a.bao.InvalidateTokens(r.PathValue("env"))
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) putSecret(w http.ResponseWriter, r *http.Request) {
	var data map[string]string
	if !decode(w, r, &data) {
		return
	}
	v := a.bao.PutSecret(r.PathValue("env"), r.PathValue("path"), data)
	reply(w, http.StatusOK, map[string]int{"version": v})
}

func (a *API) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("destroy") == "true" {
		a.bao.DestroySecret(r.PathValue("env"), r.PathValue("path"))
	} else {
		a.bao.DeleteSecret(r.PathValue("env"), r.PathValue("path"))
	}
	w.WriteHeader(http.StatusNoContent)
}

// list answers what get returns for the path's env, [] for none.
func list[T any](get func(envID string) []T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, nonNil(get(r.PathValue("env")))) }
}

// latest answers the object of the path's env's latest check-in that get returns, or
// 404 naming it and why a check-in carries none (absent).
func latest[T any](get func(envID string) (T, bool), object, absent string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env := r.PathValue("env")
		v, ok := get(env)
		if !ok {
			fail(w, http.StatusNotFound, "the latest check-in of "+env+" carries no "+object+" object ("+absent+", or no check-in yet)")
			return
		}
		reply(w, http.StatusOK, v)
	}
}

func (a *API) waitReport(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		fail(w, http.StatusBadRequest, "n must be an integer ≥ 1")
		return
	}
	timeout := 30 * time.Second
	if v := r.URL.Query().Get("timeout"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil || timeout <= 0 {
			fail(w, http.StatusBadRequest, "timeout must be a positive Go duration such as 30s")
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	rep, err := a.tenancy.WaitReport(ctx, r.PathValue("env"), n)
	if err != nil {
		fail(w, http.StatusGatewayTimeout, err.Error())
		return
	}
	reply(w, http.StatusOK, rep)
}

func (a *API) requests(w http.ResponseWriter, _ *http.Request) {
	var out []Request
	for _, q := range a.tenancy.Requests() {
		out = append(out, Request{Service: "tenancy", Method: q.Method, Path: q.Path, EnvID: q.EnvID, Status: q.Status, Time: q.Time})
	}
	for _, q := range a.bao.Requests() {
		out = append(out, Request{Service: "bao", Method: q.Method, Path: q.Path, Status: q.Status, Time: q.Time})
	}
	slices.SortStableFunc(out, func(x, y Request) int { return x.Time.Compare(y.Time) })
	reply(w, http.StatusOK, nonNil(out))
}

func (a *API) getFaults(w http.ResponseWriter, _ *http.Request) {
	tf := a.tenancy.Faults()
	a.mu.Lock()
	f := a.baoFault
	a.mu.Unlock()
	f.LeaseShape, f.LeaseBudget, f.Status = tf.LeaseShape, tf.LeaseBudget, tf.Status
	f.RetryAfterS, f.EchoBearer, f.TruncateBundle = int64(tf.RetryAfter/time.Second), tf.EchoBearer, tf.TruncateBundle
	f.DelayMS = nil
	for k, d := range tf.Delay {
		if f.DelayMS == nil {
			f.DelayMS = map[string]int{}
		}
		f.DelayMS[k] = int(d / time.Millisecond)
	}
	reply(w, http.StatusOK, f)
}

var calls = []string{"checkin", "bundle", "signature", "lease", "report"}

func (a *API) putFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if !decode(w, r, &f) {
		return
	}
	if err := validFaults(f); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	tf := faketenancy.Faults{
		LeaseShape: f.LeaseShape, Status: f.Status, RetryAfter: time.Duration(f.RetryAfterS) * time.Second,
		LeaseBudget: f.LeaseBudget, EchoBearer: f.EchoBearer, TruncateBundle: f.TruncateBundle,
	}
	for k, ms := range f.DelayMS {
		if tf.Delay == nil {
			tf.Delay = map[string]time.Duration{}
		}
		tf.Delay[k] = time.Duration(ms) * time.Millisecond
	}
	a.tenancy.SetFaults(tf)
	a.bao.SetSealed(f.Sealed)
	a.bao.SetLoginFault(f.LoginFault)
	if f.TokenTTLS > 0 {
		a.bao.SetTokenTTL(time.Duration(f.TokenTTLS) * time.Second)
	}
	a.mu.Lock()
	a.baoFault = Faults{Sealed: f.Sealed, LoginFault: f.LoginFault, TokenTTLS: f.TokenTTLS}
	a.mu.Unlock()
	a.log.Info("faults set", "lease_shape", f.LeaseShape, "sealed", f.Sealed, "login_fault", f.LoginFault)
	w.WriteHeader(http.StatusNoContent)
}

func validFaults(f Faults) error {
	switch f.LeaseShape {
	case "", "approle", "wrapped":
	default:
		return fmt.Errorf("lease_shape %q is not \"\", \"approle\" or \"wrapped\"", f.LeaseShape)
	}
	switch f.LoginFault {
	case fakebao.FaultNone, fakebao.FaultWrapped, fakebao.FaultAppRole, fakebao.FaultNoToken, fakebao.FaultLimitedUse:
	default:
		return fmt.Errorf("login_fault %q is not one of \"\", wrapped, approle, no-token, limited-use", f.LoginFault)
	}
	for k, st := range f.Status {
		if !slices.Contains(calls, k) {
			return fmt.Errorf("status: unknown call %q (checkin, bundle, signature, lease, report)", k)
		}
		if st < 100 || st > 599 {
			return fmt.Errorf("status.%s: %d is not an HTTP status", k, st)
		}
	}
	for k, ms := range f.DelayMS {
		if !slices.Contains(calls, k) || ms < 0 {
			return fmt.Errorf("delay_ms: %q must name a call and be ≥ 0", k)
		}
	}
	if f.LeaseBudget < 0 || f.RetryAfterS < 0 || f.TokenTTLS < 0 {
		return errors.New("lease_budget, retry_after_s and token_ttl_s must not be negative")
	}
	return nil
}

// Login logs into the fake OpenBao at baoURL with grant (POST
// /v1/auth/jwt-tenancy/login) and returns the client token.
func Login(ctx context.Context, hc *http.Client, baoURL, grant string) (string, error) {
	body, _ := json.Marshal(map[string]string{"role": fakebao.DefaultRole, "jwt": grant})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baoURL+"/v1/auth/"+fakebao.DefaultAuthMount+"/login", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("login to the fake OpenBao: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // the answer is decoded below; nothing to report
	var out struct {
		Auth *struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("login to the fake OpenBao: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Auth == nil || out.Auth.ClientToken == "" {
		return "", errors.New("login to the fake OpenBao: no client token in the answer")
	}
	return out.Auth.ClientToken, nil
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		fail(w, http.StatusBadRequest, "the body is not the JSON this call takes: "+err.Error())
		return false
	}
	return true
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	reply(w, status, map[string]string{"error": msg})
}
