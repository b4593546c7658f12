package bundle

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Code is the stable code of a refusal (SPEC §7). Codes are part of the wire
// contract: they appear in reports, in `monky-deployd verify --json` and in logs, and
// they never change meaning.
type Code string

// The refusal codes of SPEC §7. docs/BUNDLE.md says when each fires and what the
// renderer author should do about it.
const (
	// CodeBundleMalformed: not a tar or gzip stream, truncated, duplicate entries, no
	// or invalid manifest, unknown schema, a size limit passed.
	CodeBundleMalformed Code = "BUNDLE_MALFORMED"
	// CodeSHAMismatch: the computed bundle sha differs from the one asked for.
	CodeSHAMismatch Code = "SHA_MISMATCH"
	// CodeEnvMismatch: manifest env_id differs from the box's env_id.
	CodeEnvMismatch Code = "ENV_MISMATCH"
	// CodeManifestPaths: an unsafe path, a non-regular entry, files not equal to the
	// tar's files, or a compose file not in files.
	CodeManifestPaths Code = "MANIFEST_PATHS"
	// CodeComposeInvalid: a compose file that compose-spec rejects.
	CodeComposeInvalid Code = "COMPOSE_INVALID"
	// CodeUnresolvedVars: the compose files reference a variable that neither vars,
	// secrets nor a default provides.
	CodeUnresolvedVars Code = "UNRESOLVED_VARS"
	// CodeSecretPath: a secret reference whose path would leave the env's root.
	CodeSecretPath Code = "SECRET_PATH"
	// CodePrivileged: a service asks for privileges the box does not allow it.
	CodePrivileged Code = "PRIVILEGED"
	// CodeRollback: the manifest serial is lower than the live release's and the
	// check-in did not make the rollback explicit.
	CodeRollback Code = "ROLLBACK"
	// CodeDiskLow: free space under deploy_dir is below what the release needs.
	CodeDiskLow Code = "DISK_LOW"
)

// Codes returns every refusal code of SPEC §7, in the order of the SPEC table.
func Codes() []Code {
	return []Code{
		CodeBundleMalformed, CodeSHAMismatch, CodeEnvMismatch, CodeManifestPaths,
		CodeComposeInvalid, CodeUnresolvedVars, CodeSecretPath, CodePrivileged,
		CodeRollback, CodeDiskLow,
	}
}

// Refusal is one reason a bundle is refused. Detail names files, variables,
// services and paths, never a value.
type Refusal struct {
	Code   Code   `json:"code"`
	Detail string `json:"detail"`
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
// interface{ Code() string } (deployd.CodeOf) find a stable code.
func (e *RefusedError) Code() string {
	if len(e.Refusals) == 0 {
		return string(CodeBundleMalformed)
	}
	return string(e.Refusals[0].Code)
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Has reports whether the error carries a refusal with code c.
func (e *RefusedError) Has(c Code) bool {
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

func (rs *refusals) add(c Code, format string, args ...any) {
	if len(rs.list) >= maxRefusals {
		rs.dropped++
		return
	}
	rs.list = append(rs.list, Refusal{Code: c, Detail: fmt.Sprintf(format, args...)})
}

func (rs *refusals) result() []Refusal {
	out := sortRefusals(slices.Clone(rs.list))
	if rs.dropped > 0 {
		out = append(out, Refusal{Code: CodeBundleMalformed,
			Detail: fmt.Sprintf("%d further refusals not listed", rs.dropped)})
	}
	return out
}

var (
	_ error                       = (*RefusedError)(nil)
	_ interface{ Code() string }  = (*RefusedError)(nil)
	_ interface{ Is(error) bool } = (*RefusedError)(nil)
)
