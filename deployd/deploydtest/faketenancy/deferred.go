package faketenancy

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/monky/monky-deployd/deployd/tenancy"
)

// Deferred is the deferred object of a check-in (docs/PROTOCOL.md, "The deferred
// object"): an apply the box prepared and did not switch to. It is the agent's own
// type (why, owner, reason, until, sha, serial, since, prepared), which the fake
// fills field by field with its own code (parseDeferred), so that the check stays
// independent of the agent's.
type Deferred = tenancy.Deferred

// deferredWire is a deferred object as it arrives; the fake checks it with its own
// code.
type deferredWire struct {
	Why      *string `json:"why"`
	Owner    string  `json:"owner"`
	Reason   string  `json:"reason"`
	Until    string  `json:"until"`
	SHA      *string `json:"sha"`
	Serial   *int64  `json:"serial"`
	Since    *string `json:"since"`
	Prepared bool    `json:"prepared"`
}

// maxDeferredText bounds owner and reason, as the protocol does.
const maxDeferredText = 200

// parseDeferred decodes a check-in's deferred object: strict about the fields it
// knows, tolerant of fields it does not. Absent or null is nil.
func parseDeferred(raw json.RawMessage) (*Deferred, error) {
	var w deferredWire
	if ok, err := decodeObject(raw, &w, "deferred"); !ok {
		return nil, err
	}
	switch {
	case w.Why == nil || (*w.Why != "hold" && *w.Why != "window"):
		return nil, &fieldError{"deferred.why", "must be hold or window"}
	case w.SHA == nil || !shaRe.MatchString(*w.SHA):
		return nil, &fieldError{"deferred.sha", "must be 64 lowercase hex"}
	case w.Serial == nil || *w.Serial < 1:
		return nil, &fieldError{"deferred.serial", "must be at least 1"}
	case len(w.Owner) > maxDeferredText || !utf8.ValidString(w.Owner):
		return nil, &fieldError{"deferred.owner", "must be UTF-8 of at most 200 bytes"}
	case len(w.Reason) > maxDeferredText || !utf8.ValidString(w.Reason):
		return nil, &fieldError{"deferred.reason", "must be UTF-8 of at most 200 bytes"}
	}
	d := &Deferred{Why: *w.Why, Owner: w.Owner, Reason: w.Reason, SHA: *w.SHA, Serial: *w.Serial, Prepared: w.Prepared}
	var err error
	if d.Since, err = rfc3339("deferred.since", w.Since); err != nil {
		return nil, err
	}
	if w.Until != "" {
		if d.Until, err = rfc3339("deferred.until", &w.Until); err != nil {
			return nil, err
		}
	}
	return d, nil
}
