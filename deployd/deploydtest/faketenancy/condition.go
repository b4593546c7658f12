package faketenancy

import (
	"encoding/json"
	"regexp"
	"time"
)

// Condition is the condition object of a check-in (docs/PROTOCOL.md, "The condition
// object"): what has kept the box from doing its job over its last runs.
type Condition struct {
	// Code is the code the latest run ended on.
	Code string `json:"code"`
	// Exit is that run's exit code (75, 1 or 78).
	Exit int `json:"exit"`
	// Since, CodeSince and Last: when the first run of the streak, the first that
	// ended on Code and the latest ended.
	Since     time.Time `json:"since"`
	CodeSince time.Time `json:"code_since"`
	Last      time.Time `json:"last"`
	// Runs counts the runs of the streak.
	Runs int `json:"runs"`
	// SHA is the bundle the latest run worked on; "" when none.
	SHA string `json:"sha,omitzero"`
	// NextAttempt is when the box tries again by itself; zero: at its next tick.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// conditionWire is a condition as it arrives; the fake checks it with its own code.
type conditionWire struct {
	Code        *string `json:"code"`
	Exit        *int    `json:"exit"`
	Since       *string `json:"since"`
	CodeSince   *string `json:"code_since"`
	Last        *string `json:"last"`
	Runs        *int    `json:"runs"`
	SHA         string  `json:"sha"`
	NextAttempt string  `json:"next_attempt"`
}

var (
	codeRe = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)
	shaRe  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// parseCondition decodes a check-in's condition object: strict about the fields it
// knows (present, of their kind, times in order), tolerant of fields it does not.
// Absent or null is nil.
func parseCondition(raw json.RawMessage) (*Condition, error) {
	var w conditionWire
	if ok, err := decodeObject(raw, &w, "condition"); !ok {
		return nil, err
	}
	switch {
	case w.Code == nil || !codeRe.MatchString(*w.Code):
		return nil, &fieldError{"condition.code", "must be a stable code"}
	case w.Exit == nil || *w.Exit < 1 || *w.Exit > 255:
		return nil, &fieldError{"condition.exit", "must be a non-zero exit code"}
	case w.Runs == nil || *w.Runs < 1:
		return nil, &fieldError{"condition.runs", "must be at least 1"}
	case w.SHA != "" && !shaRe.MatchString(w.SHA):
		return nil, &fieldError{"condition.sha", "must be 64 lowercase hex"}
	}
	c := &Condition{Code: *w.Code, Exit: *w.Exit, Runs: *w.Runs, SHA: w.SHA}
	var err error
	for _, f := range []struct {
		name string
		in   *string
		out  *time.Time
	}{{"since", w.Since, &c.Since}, {"code_since", w.CodeSince, &c.CodeSince}, {"last", w.Last, &c.Last}} {
		if *f.out, err = rfc3339("condition."+f.name, f.in); err != nil {
			return nil, err
		}
	}
	if c.CodeSince.Before(c.Since) || c.Last.Before(c.CodeSince) {
		return nil, &fieldError{"condition", "must have since ≤ code_since ≤ last"}
	}
	if w.NextAttempt != "" {
		if c.NextAttempt, err = rfc3339("condition.next_attempt", &w.NextAttempt); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// decodeObject decodes the object raw into its wire struct w; it is false (and the
// error nil) when raw is absent or null, and an error naming the object when raw is
// not an object of the documented fields and kinds.
func decodeObject(raw json.RawMessage, w any, name string) (bool, error) {
	if len(raw) == 0 || isNull(raw) {
		return false, nil
	}
	if err := json.Unmarshal(raw, w); err != nil {
		return false, &fieldError{name, "must be an object of the documented fields"}
	}
	return true, nil
}

// rfc3339 parses the time in of the field name: it is required (in is not nil) and
// must be an RFC 3339 time.
func rfc3339(name string, in *string) (time.Time, error) {
	if in == nil {
		return time.Time{}, &fieldError{name, "is required"}
	}
	t, err := time.Parse(time.RFC3339, *in)
	if err != nil {
		return time.Time{}, &fieldError{name, "must be an RFC 3339 time"}
	}
	return t, nil
}

// clonePtr returns a copy of *p (nil for nil), so that what the server stores is
// never shared.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
