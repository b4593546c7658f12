package bundle

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/monky/monky-deployd/deployd/codes"
)

// Refusal is one reason a bundle is refused. Detail names files, variables,
// services and paths, never a value.
type Refusal struct {
	// Code is one of codes.Refusals (docs/BUNDLE.md, "Refusal codes").
	Code   codes.Code `json:"code"`
	Detail string     `json:"detail"`
}

// String returns "CODE: detail".
func (r Refusal) String() string { return string(r.Code) + ": " + r.Detail }

// ErrRefused matches every *RefusedError with errors.Is.
var ErrRefused = errors.New("bundle refused")

// ErrInvalidArgument is returned (wrapped) when the caller's own arguments are
// wrong, for example an Expect without EnvID. It is a plain error, not a refusal:
// nothing is wrong with the bundle.
var ErrInvalidArgument = errors.New("bundle: invalid argument")

// RefusedError is the error returned for a refused bundle. It carries every
// refusal, sorted by code and detail so that output is deterministic.
type RefusedError struct {
	// SHA is the bundle sha, or "" when the stream was too broken to compute it.
	SHA string
	// Refusals holds at least one refusal.
	Refusals []Refusal
}

// Error lists the refusals on one line.
func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString("bundle refused")
	if e.SHA != "" {
		b.WriteString(" (sha ")
		b.WriteString(e.SHA)
		b.WriteString(")")
	}
	for i, r := range e.Refusals {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(r.String())
	}
	return b.String()
}

// Code returns the code of the first refusal, so that callers that look for
// interface{ Code() codes.Code } (deployd.CodeOf) find a stable code.
func (e *RefusedError) Code() codes.Code {
	if len(e.Refusals) == 0 {
		return codes.BundleMalformed
	}
	return e.Refusals[0].Code
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Has reports whether the error carries a refusal with code c.
func (e *RefusedError) Has(c codes.Code) bool {
	return slices.ContainsFunc(e.Refusals, func(r Refusal) bool { return r.Code == c })
}

// sortRefusals sorts stably by code then detail and drops exact duplicates.
func sortRefusals(rs []Refusal) []Refusal {
	slices.SortStableFunc(rs, func(a, b Refusal) int {
		return cmp.Or(cmp.Compare(a.Code, b.Code), cmp.Compare(a.Detail, b.Detail))
	})
	return slices.Compact(rs)
}

// refusals collects refusals with a bound on their number, so that a hostile bundle
// with thousands of bad entries cannot grow the list without limit.
type refusals struct {
	list    []Refusal
	dropped int
}

// maxRefusals bounds the refusals one call returns; the rest are counted.
const maxRefusals = 200

func (rs *refusals) add(c codes.Code, format string, args ...any) {
	if len(rs.list) >= maxRefusals {
		rs.dropped++
		return
	}
	rs.list = append(rs.list, Refusal{Code: c, Detail: fmt.Sprintf(format, args...)})
}

func (rs *refusals) result() []Refusal {
	out := sortRefusals(slices.Clone(rs.list))
	if rs.dropped > 0 {
		out = append(out, Refusal{Code: codes.BundleMalformed,
			Detail: fmt.Sprintf("%d further refusals not listed", rs.dropped)})
	}
	return out
}

var (
	_ error                          = (*RefusedError)(nil)
	_ interface{ Code() codes.Code } = (*RefusedError)(nil)
	_ interface{ Is(error) bool }    = (*RefusedError)(nil)
)
