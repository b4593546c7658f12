package tenancy

import (
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/ids"
)

// MaxDeferredText bounds the deferred object's owner and reason, in bytes.
const MaxDeferredText = 200

// Deferred is an apply the box prepared and did not switch to, as the check-in
// carries it: an additive part of the check-in (docs/PROTOCOL.md, "The deferred
// object") that a tenancy which does not know it ignores. The check-in carries none
// while nothing waits. Its JSON form is the deferred object's; the agent keeps it
// in state.json as it is (deployd.Deferral), and the check-in sends its times in
// UTC, to the second.
type Deferred struct {
	// Why is "hold" (a person at the box set a hold) or "window" (outside the box's
	// apply windows).
	Why string `json:"why"`
	// Owner and Reason are the hold's: who set it and why ("" for a window). Reason
	// must already be redacted by the caller; both are sent as valid UTF-8 within
	// MaxDeferredText bytes.
	Owner  string `json:"owner,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Until is when the box switches by itself at the latest: the hold's end, or the
	// window's next opening; zero when not known.
	Until time.Time `json:"until,omitzero"`
	// SHA and Serial are what waits (required).
	SHA    string `json:"sha"`
	Serial int64  `json:"serial"`
	// Since is when the box first deferred it (required).
	Since time.Time `json:"since"`
	// Prepared is true once the bundle was downloaded, verified, kept and its images
	// pulled.
	Prepared bool `json:"prepared"`
}

// wire is d as it travels: owner and reason bounded, times in UTC to the second;
// nil for nil.
func (d *Deferred) wire() *Deferred {
	if d == nil {
		return nil
	}
	w := *d
	w.Owner, w.Reason = boundText(d.Owner), boundText(d.Reason)
	w.Until, w.Since = toSecond(d.Until), toSecond(d.Since)
	return &w
}

// toSecond is t in UTC to the second, as the wire's times are: it marshals as
// wireTime(t) does (the zero time stays zero).
func toSecond(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// boundText is s as valid UTF-8 within MaxDeferredText bytes.
func boundText(s string) string {
	return cutUTF8(strings.ToValidUTF8(s, "\uFFFD"), MaxDeferredText)
}

// validDeferred refuses, naming the field, a deferred object the agent must not send.
func validDeferred(d *Deferred) error {
	if d == nil {
		return nil
	}
	switch {
	case d.Why != "hold" && d.Why != "window":
		return refuseCheckin("deferred.why must be hold or window")
	case !ids.ValidSHA(d.SHA):
		return refuseCheckin("deferred.sha is not 64 lowercase hex")
	case d.Serial < 1:
		return refuseCheckin("deferred.serial must be at least 1")
	case d.Since.IsZero():
		return refuseCheckin("deferred.since is required")
	}
	return nil
}
