package tenancy

import (
	"fmt"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/ids"
)

// Condition is what has kept the box from doing its job over consecutive runs, as
// the check-in carries it: an additive part of the check-in (docs/PROTOCOL.md, "The
// condition object") that a tenancy which does not know it ignores. The check-in
// carries none while the box's last run ended 0.
type Condition struct {
	// Code is the code the latest run ended on (required).
	Code codes.Code
	// Exit is that run's exit code: 75 (temporary), 1 or 78.
	Exit int
	// Since is when the first run of the streak ended; CodeSince when the first that
	// ended on Code did; Last when the latest did. Since ≤ CodeSince ≤ Last.
	Since, CodeSince, Last time.Time
	// Runs counts the runs of the streak (≥ 1).
	Runs int
	// SHA is the bundle the latest run worked on; "" when it had none.
	SHA string
	// NextAttempt is when the box tries again by itself where it waits (tenancy's
	// Retry-After, a sha held for an hour); zero: at its next tick.
	NextAttempt time.Time
}

// conditionWire is Condition as it travels.
type conditionWire struct {
	Code        codes.Code `json:"code"`
	Exit        int        `json:"exit"`
	Since       string     `json:"since"`
	CodeSince   string     `json:"code_since"`
	Last        string     `json:"last"`
	Runs        int        `json:"runs"`
	SHA         string     `json:"sha,omitempty"`
	NextAttempt string     `json:"next_attempt,omitempty"`
}

// wire is c as it travels; nil for nil.
func (c *Condition) wire() *conditionWire {
	if c == nil {
		return nil
	}
	return &conditionWire{Code: c.Code, Exit: c.Exit, Since: wireTime(c.Since), CodeSince: wireTime(c.CodeSince),
		Last: wireTime(c.Last), Runs: c.Runs, SHA: c.SHA, NextAttempt: wireTimeOrEmpty(c.NextAttempt)}
}

func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// wireTimeOrEmpty is wireTime(t), "" (a field left out) for the zero time.
func wireTimeOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return wireTime(t)
}

// refuseCheckin is a check-in the client refuses to send, what naming the field:
// "tenancy: checkin: <what>: …", matching ErrInvalidArgument.
func refuseCheckin(what string) error {
	return fmt.Errorf("tenancy: checkin: %s: %w", what, ErrInvalidArgument)
}

// validCondition refuses, naming the field, a condition the agent must not send.
func validCondition(c *Condition) error {
	if c == nil {
		return nil
	}
	switch {
	case c.Code == "":
		return refuseCheckin("condition.code is required")
	case c.Exit <= 0 || c.Exit > 255:
		return refuseCheckin("condition.exit must be a non-zero exit code")
	case c.Since.IsZero(), c.CodeSince.IsZero(), c.Last.IsZero():
		return refuseCheckin("condition.since, code_since and last are required")
	case c.CodeSince.Before(c.Since), c.Last.Before(c.CodeSince):
		return refuseCheckin("condition.since ≤ code_since ≤ last does not hold")
	case c.Runs < 1:
		return refuseCheckin("condition.runs must be at least 1")
	case c.SHA != "" && !ids.ValidSHA(c.SHA):
		return refuseCheckin("condition.sha is not 64 lowercase hex")
	}
	return nil
}
