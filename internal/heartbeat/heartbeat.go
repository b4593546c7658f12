// Package heartbeat is the check-in as both binaries send it (cmd/monky-deployd
// through deployd.Agent, cmd/monky-deployd-tick on its own): the request built from
// the state, the answer recorded in it, and what a temporary failure of tenancy
// means. It is light (no OpenZiti, no OpenBao client, no compose-go).
package heartbeat

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/secret"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/config"
	"github.com/monky/monky-deployd/internal/contract"
	"github.com/monky/monky-deployd/internal/state"
	"github.com/monky/monky-deployd/internal/transport"
)

// Request is the check-in of the box serving envID: what st says of the live release
// and of the last outcome, the host's facts, and st.Live.
func Request(envID, version string, st *state.State, host tenancy.Host) tenancy.Checkin {
	return tenancy.Checkin{
		EnvID:         envID,
		AgentVersion:  version,
		CurrentSHA:    st.LiveSHA,
		CurrentSerial: st.LiveSerial,
		LastResult:    tenancy.Result(st.LastResult),
		LastCode:      st.LastCode,
		Host:          host,
		Live:          state.Tenancy(st.Live),
	}
}

// Send sends req and, when tenancy answers, records the answer in st (at now). The
// heartbeat never depends on the optional live object: when the client refuses it
// (what docker said did not pass the client's checks), the check-in carries why
// instead. redact scrubs secret values from an error text. The error is the client's,
// for the caller to classify.
func Send(ctx context.Context, c *tenancy.Client, req tenancy.Checkin, st *state.State, now func() time.Time, log *slog.Logger, redact func(string) string) (tenancy.Instruction, error) {
	inst, err := c.Checkin(ctx, req)
	if errors.Is(err, tenancy.ErrInvalidArgument) && req.Live != nil {
		log.Warn("the live health read from docker cannot be sent; the check-in carries why instead", "err", err)
		st.Live = &state.LiveHealth{SHA: st.LiveSHA, ObservedAt: req.Live.ObservedAt, Reason: "the live health read from docker was refused by the client: " + redact(err.Error())}
		req.Live = state.Tenancy(st.Live)
		inst, err = c.Checkin(ctx, req)
	}
	if err != nil {
		return inst, err
	}
	st.LastCheckin = now()
	st.LastAction = string(inst.Action)
	st.NextCheckin = inst.NextCheckin
	return inst, nil
}

// Temporary reports whether err, of the tenancy call op, is worth retrying at the next
// tick, with its code (UNAVAILABLE, or RATE_LIMITED for a 429), and logs what that
// means for an operator.
func Temporary(log *slog.Logger, op string, err error) (codes.Code, bool) {
	if !tenancy.IsTemporary(err) {
		return "", false
	}
	code := codes.Unavailable
	if errors.Is(err, tenancy.ErrRateLimited) {
		code = codes.RateLimited
	}
	log.Warn("tenancy unavailable; exiting 75, the next tick retries", "op", op, "code", code, "err", err)
	return code, true
}

// TransportConfig is the transport to tenancy that cfg describes.
func TransportConfig(cfg config.Config, log *slog.Logger) transport.Config {
	return transport.Config{
		Transport:  cfg.Tenancy.Transport,
		URL:        cfg.Tenancy.URL,
		Service:    cfg.Tenancy.Service,
		Identity:   cfg.Tenancy.Identity,
		Proxy:      cfg.Tenancy.Proxy,
		CAFile:     cfg.Tenancy.CAFile,
		ServerName: cfg.Tenancy.ServerName,
		// Shorter than the call's deadline, so that a dial that hangs (a frozen
		// controller) ends with the transport's error, which names the service and
		// the controller, rather than the call's bare deadline.
		Timeout: time.Duration(cfg.Tenancy.Timeout) * 4 / 5,
		Logger:  log,
	}
}

// NewClient is the tenancy client of cfg over httpc, authenticated by token; red
// learns and scrubs the secrets the client handles.
func NewClient(cfg config.Config, httpc *http.Client, token func(context.Context) (secret.Value, error), red *secret.Redactor, log *slog.Logger) (*tenancy.Client, error) {
	return tenancy.New(tenancy.Config{
		BaseURL:    cfg.Tenancy.URL,
		HTTPClient: httpc,
		Token:      token,
		UserAgent:  "monky-deployd/" + contract.Version,
		Timeout:    time.Duration(cfg.Tenancy.Timeout),
		AuthMount:  cfg.Bao.AuthMount,
		Role:       cfg.Bao.Role,
		Secrets:    red,
		Logger:     log,
	})
}
