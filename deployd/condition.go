package deployd

import (
	"errors"
	"fmt"
	"time"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/deployd/tenancy"
)

// Condition is what has kept the box from doing its job over consecutive runs: a
// streak of runs (ticks and bootstraps) that did not end with exit 0. It is kept in
// state.json with the rest of the state, and `status`, the metrics file and the
// check-in all render this one record (docs/OPERATIONS.md, "Watching a box"), so a
// box that has failed for an hour says so everywhere, with the code and since when.
type Condition struct {
	// Code is the code the latest run of the streak ended on.
	Code codes.Code `json:"code"`
	// Exit is that run's exit code: 75 (temporary), 1 or 78.
	Exit int `json:"exit"`
	// Since is when the first run of the streak ended: the box has not done its job
	// since then.
	Since time.Time `json:"since"`
	// CodeSince is when the first run of the streak that ended on Code ended.
	CodeSince time.Time `json:"code_since"`
	// Last is when the latest run of the streak ended.
	Last time.Time `json:"last"`
	// Runs counts the runs of the streak.
	Runs int `json:"runs"`
	// SHA is the bundle the latest run worked on; "" when it had none.
	SHA string `json:"sha,omitempty"`
	// Detail says what failed, redacted and bounded: files, variables and services,
	// never a value.
	Detail string `json:"detail,omitempty"`
	// NextAttempt is when the box tries again by itself where it waits rather than
	// at the next tick: tenancy's Retry-After (no download and no lease before it), or
	// the end of a sha's hold (a missing secret). Zero: at the next tick.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// Temporary reports whether the condition's runs end with exit 75.
func (c *Condition) Temporary() bool { return c != nil && c.Exit == ExitTemporary }

// Waiting reports whether the box waits for c.NextAttempt at now: an apply then
// checks in (the heartbeat) but neither downloads nor asks for a lease.
func (c *Condition) Waiting(now time.Time) bool {
	return c.Temporary() && c.NextAttempt.After(now)
}

// String is the condition as status's first line and the log tell it, e.g.
// "UNAVAILABLE (exit 75) since 2026-12-03T10:00:00Z, 61 runs".
func (c *Condition) String() string {
	s := fmt.Sprintf("%s (exit %d) since %s, %d runs", c.Code, c.Exit, c.CodeSince.UTC().Format(time.RFC3339), c.Runs)
	if c.Since.Before(c.CodeSince) {
		s += fmt.Sprintf("; not ok since %s", c.Since.UTC().Format(time.RFC3339))
	}
	if !c.NextAttempt.IsZero() {
		s += "; next attempt " + c.NextAttempt.UTC().Format(time.RFC3339)
	}
	return s
}

// endRun records in s how a run that began at start ended at at with err (redact
// makes its text safe for the state): the run's exit code and time, the last failure,
// and the condition: a run that ended 0 ends it, any other extends it (or starts one).
func endRun(s *State, start, at time.Time, sha string, err error, redact func(string) string) {
	v := classify(err)
	exit := ExitOK
	if err != nil {
		exit = v.rule.exit(v.code)
	}
	s.LastTick, s.LastExit = at, exit
	if exit == ExitOK {
		s.Condition = nil
		return
	}
	s.LastFailure = &RunFailure{At: at, Exit: exit, Code: v.code}
	c := s.Condition
	if c == nil {
		c = &Condition{Since: at}
		s.Condition = c
	}
	if c.Code != v.code || c.Runs == 0 {
		c.CodeSince = at
	}
	c.Code, c.Exit, c.Last, c.SHA = v.code, exit, at, sha
	c.Runs++
	c.Detail = boundDetail(redact(err.Error()))
	c.NextAttempt = nextAttempt(s, start, sha, err)
}

// nextAttempt is when the box tries again by itself after a run that began at start
// and ended with err on sha: the end of tenancy's Retry-After (counted from the
// run's start, when tenancy said it), the wait the run kept, or the end of the sha's
// hold; zero when it is the next tick.
func nextAttempt(s *State, start time.Time, sha string, err error) time.Time {
	var w *waitError
	if errors.As(err, &w) {
		return w.until
	}
	if d, ok := tenancy.RetryAfter(err); ok {
		return start.Add(d)
	}
	if f, ok := s.Failed[sha]; ok && sha != "" {
		return f.Until
	}
	return time.Time{}
}

// waitError is an apply held back by tenancy's Retry-After, which an earlier run
// recorded: the run checked in, and exits 75 without a download or a lease until it
// has passed.
type waitError struct {
	code  codes.Code
	until time.Time
}

func (e *waitError) Error() string {
	return fmt.Sprintf("tenancy asked the box to wait until %s (%s): no download and no lease before then", e.until.UTC().Format(time.RFC3339), e.code)
}

// Code is the code of the condition the box waits out.
func (e *waitError) Code() codes.Code { return e.code }

// checkinCondition is c as the check-in carries it; nil for nil.
func checkinCondition(c *Condition) *tenancy.Condition {
	if c == nil {
		return nil
	}
	return &tenancy.Condition{Code: c.Code, Exit: c.Exit, Since: c.Since, CodeSince: c.CodeSince, Last: c.Last,
		Runs: c.Runs, SHA: c.SHA, NextAttempt: c.NextAttempt}
}
