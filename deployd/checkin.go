package deployd

import (
	"context"
	"errors"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
)

// tenancyFailure classifies an error of a tenancy call of the tick.
func (t *tick) tenancyFailure(op string, err error) error {
	return t.a.tenancyFailure(t.st, op, err)
}

// checkin sends the heartbeat and returns tenancy's instruction.
func (a *Agent) checkin(ctx context.Context, st *State) (tenancy.Instruction, error) {
	free, _ := fsutil.FreeMB(fsutil.ExistingParent(a.cfg.DeployDir))
	st.Live = a.observeLive(ctx, st)
	req := tenancy.Checkin{
		EnvID:         a.cfg.EnvID,
		AgentVersion:  Version,
		CurrentSHA:    st.LiveSHA,
		CurrentSerial: st.LiveSerial,
		LastResult:    tenancy.Result(st.LastResult),
		LastCode:      st.LastCode,
		Host:          tenancy.Host{Hostname: a.opts.Hostname, DockerVersion: a.dockerVersion(ctx, st), FreeMB: free},
		Live:          liveForTenancy(st.Live),
		Condition:     checkinCondition(st.Condition),
	}
	inst, err := a.tenancy.Checkin(ctx, req)
	if errors.Is(err, tenancy.ErrInvalidArgument) && req.Live != nil {
		// The heartbeat never depends on the optional live object: when the client
		// refuses what docker said, the check-in carries why instead.
		a.log.Warn("the live health read from docker cannot be sent; the check-in carries why instead", "err", err)
		st.Live = &LiveHealth{SHA: st.LiveSHA, ObservedAt: req.Live.ObservedAt, Reason: "the live health read from docker was refused by the client: " + a.red.Redact(err.Error())}
		req.Live = liveForTenancy(st.Live)
		inst, err = a.tenancy.Checkin(ctx, req)
	}
	if err != nil {
		return inst, a.tenancyFailure(st, "check-in", err)
	}
	st.LastCheckin = a.now()
	st.LastAction = string(inst.Action)
	st.NextCheckin = inst.NextCheckin
	return inst, nil
}

// tenancyFailure is an error of a tenancy call with what it means for the operator
// logged; an env mismatch is latched: later runs exit 78 without the network.
func (a *Agent) tenancyFailure(st *State, op string, err error) error {
	err = &Error{Op: op, Err: err}
	v := classify(err)
	switch {
	case v.code == codes.AgentEnvMismatch:
		st.EnvMismatch = &Latch{EnvID: a.cfg.EnvID, At: a.now(), Message: a.red.Redact(err.Error())}
		a.log.Error("tenancy answered AGENT_ENV_MISMATCH: this box's token belongs to another environment. Latched: later runs exit 78 without the network until env_id changes or you bootstrap with a grant for "+a.cfg.EnvID,
			"op", op, "err", err)
	case v.code == codes.Unauthenticated:
		a.log.Error("tenancy rejected the OpenBao token; place a fresh bootstrap grant and run `monky-deployd bootstrap`",
			"op", op, "grant", a.cfg.BootstrapGrant, "err", err)
	case v.rule.fault == faultTemporary:
		a.log.Warn("tenancy unavailable or answering what this agent cannot read; exiting 75, the next tick retries", "op", op, "code", v.code, "err", err)
	default:
		a.log.Error("tenancy call failed", "op", op, "code", v.code, "err", err)
	}
	return err
}
