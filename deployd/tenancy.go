package deployd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
	"github.com/monky/monky-deployd/internal/fsutil"
	"github.com/monky/monky-deployd/internal/release"
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
		Deferred:      a.deferredForCheckin(st, a.now()),
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
		err = a.tenancyFailure(st, "check-in", err)
		noteUnreached(st, err, a.now())
		return inst, err
	}
	st.Unreached = time.Time{}
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

// checkinCondition is c as the check-in carries it; nil for nil.
func checkinCondition(c *Condition) *tenancy.Condition {
	if c == nil {
		return nil
	}
	return &tenancy.Condition{Code: c.Code, Exit: c.Exit, Since: c.Since, CodeSince: c.CodeSince, Last: c.Last,
		Runs: c.Runs, SHA: c.SHA, NextAttempt: c.NextAttempt}
}

// observeLive reads the live release's health for the check-in; nil when nothing is
// live. It never fails: what cannot be read becomes the Reason, and the check-in goes
// out all the same. It changes nothing: an unhealthy release is only told.
func (a *Agent) observeLive(ctx context.Context, st *State) *LiveHealth {
	if st.LiveSHA == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	at := a.now()
	obs, err := a.observe(ctx, st)
	if err != nil {
		return unobservedLive(a.log, st.LiveSHA, at, a.red.Redact(err.Error()))
	}
	return judgeLive(a.log, st.LiveSHA, st.Live, obs, a.store.CurrentLink(), a.cfg.Compose.Project)
}

// observe asks docker about the live release's services. Through the Engine API the
// project name is all it takes; the CLI (docker compose ps) also needs the release's
// compose files, from its manifest. Services not recorded (a repaired state, one
// written by an older agent) are read from the release once and recorded.
func (a *Agent) observe(ctx context.Context, st *State) (compose.Observation, error) {
	var files []string
	switch {
	case len(st.LiveServices) == 0:
		rel, err := a.store.Read(ctx, st.LiveSHA, a.expect())
		if err != nil {
			return compose.Observation{}, fmt.Errorf("the live release %s cannot be read: %w", release.Short(st.LiveSHA), err)
		}
		files, st.LiveServices = rel.Manifest.ComposeFiles, slices.Clone(rel.Services)
	case a.engine == nil:
		m, err := a.store.Manifest(st.LiveSHA)
		if err != nil {
			return compose.Observation{}, fmt.Errorf("the live release %s cannot be read: %w", release.Short(st.LiveSHA), err)
		}
		files = m.ComposeFiles
	}
	cc, err := a.composeFor(st.LiveSHA, files)
	if err != nil {
		return compose.Observation{}, err
	}
	return cc.ObserveAfter(ctx, liveObservation(st.Live), st.LiveServices, st.LiveOneShots)
}

// dockerVersion is the docker server version for the check-in. It is kept in the
// state for an hour, so that the idle tick (one process per timer run) runs no
// subprocess.
func (a *Agent) dockerVersion(ctx context.Context, st *State) string {
	now := a.now()
	if dockerVersionFresh(st, now) {
		return st.DockerVersion
	}
	v, err := a.readDockerVersion(ctx)
	if err != nil {
		a.log.Debug("could not read the docker version; the check-in sends none", "err", err)
	}
	st.DockerVersion, st.DockerVersionAt = v, now
	return v
}

// maxTail bounds the report's tail.
const maxTail = 8 << 10

// report sends the tick's report (result, the cause's code and detail, the tail of a
// failure, the services) and records the outcome in the state. A report that cannot
// be sent is logged; the next check-in carries the result again.
func (t *tick) report(ctx context.Context, result tenancy.Result, cause error, services []tenancy.ServiceState) error {
	out := &t.out
	out.Result = string(result)
	out.Code = CodeOf(cause)
	if cause != nil {
		out.Detail = boundDetail(t.a.red.Redact(cause.Error()))
	} else if t.note != "" {
		out.Detail = boundDetail(t.note)
	}
	st := t.st
	st.LastResult, st.LastCode, st.LastDetail, st.LastSHA = out.Result, out.Code, out.Detail, out.SHA
	if st.Lease != nil && st.Lease.SHA == out.SHA {
		st.Lease = nil // the report closes the deploy the lease was for
	}
	closeHooks(st, out.SHA)
	tail := ""
	if result == tenancy.ResultFailed {
		tail = boundTail(t.a.red.Redact(t.tail))
	}
	rep := tenancy.Report{
		EnvID:    t.a.cfg.EnvID,
		SHA:      out.SHA,
		Serial:   out.Serial,
		Result:   result,
		Code:     out.Code,
		Detail:   out.Detail,
		Tail:     tail,
		Services: services,
		Duration: t.a.now().Sub(t.started),
	}
	if err := t.a.tenancy.Report(ctx, rep); err != nil {
		if errors.Is(err, tenancy.ErrEnvMismatch) {
			// As at the check-in: latch, and exit 78 whatever the tick's outcome.
			return t.tenancyFailure("report", err)
		}
		t.log.Warn("could not send the report; the next check-in carries the last result", "result", result, "code", out.Code, "err", err)
		if cause == nil {
			cause = &Error{Op: "report", Err: err}
		}
	}
	return cause
}

// refusalList prints a refusal as its refusals, "CODE: detail; CODE: detail", for the
// report's detail; errors.As still finds the RefusedError.
type refusalList struct{ r *bundle.RefusedError }

func (l refusalList) Error() string {
	parts := make([]string, 0, len(l.r.Refusals))
	for _, rf := range l.r.Refusals {
		parts = append(parts, rf.String())
	}
	return strings.Join(parts, "; ")
}

func (l refusalList) Unwrap() error { return l.r }

// boundTail keeps the end of a tail (where compose says what went wrong) within
// maxTail bytes, cut at a rune boundary.
func boundTail(s string) string { return keepEnd(s, maxTail) }

func toServiceStates(in []compose.ServiceState) []tenancy.ServiceState {
	out := make([]tenancy.ServiceState, 0, len(in))
	for _, s := range in {
		out = append(out, tenancy.ServiceState{Name: s.Name, State: s.State, Health: s.Health})
	}
	return out
}
