package deployd

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/bundle"
	"github.com/monky/monky-deployd/deployd/compose"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// maxTail bounds the report's tail.
const maxTail = 8 << 10

// maxEvidence bounds the health evidence kept with a failure in state.json (the
// report's tail has up to maxTail of it).
const maxEvidence = 4 << 10

// maxDetail bounds the report's detail and the copies of it in state.json: a bundle
// can carry up to 200 refusals, each naming a path or a variable.
const maxDetail = 4 << 10

// detailCut ends a detail that was cut to maxDetail.
const detailCut = " … (cut)"

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

// boundDetail keeps the head of a detail (the first refusals say the most) within
// maxDetail bytes, cut at a rune boundary.
func boundDetail(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	n := maxDetail - len(detailCut)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + detailCut
}

// boundTail keeps the end of a tail (where compose says what went wrong) within
// maxTail bytes, cut at a rune boundary.
func boundTail(s string) string { return keepEnd(s, maxTail) }

// keepEnd keeps the end of s within n bytes, cut at a rune boundary.
func keepEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

func toServiceStates(in []compose.ServiceState) []tenancy.ServiceState {
	out := make([]tenancy.ServiceState, 0, len(in))
	for _, s := range in {
		out = append(out, tenancy.ServiceState{Name: s.Name, State: s.State, Health: s.Health})
	}
	return out
}
