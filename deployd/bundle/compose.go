package bundle

import (
	"context"
	"maps"
	"slices"

	"github.com/monky/monky-deployd/deployd/codes"
	"github.com/monky/monky-deployd/internal/composecheck"
)

// checkCompose runs the compose checks (compose-spec validity, unresolved variables,
// privileges, env_file paths, build contexts) over the kept files and maps the
// findings to refusals. It returns the services, the refusals and compose's warnings.
func checkCompose(ctx context.Context, m *Manifest, files map[string][]byte, exp Expect) ([]string, []Refusal, []string) {
	project := exp.ProjectName
	if project == "" {
		project = composeProject
	}
	res := composecheck.Check(ctx, composecheck.Input{
		Files:           files,
		ComposeFiles:    slices.Clone(m.ComposeFiles),
		BundleFiles:     slices.Clone(m.Files),
		Vars:            maps.Clone(m.Vars),
		SecretNames:     slices.Sorted(maps.Keys(m.Secrets)),
		AllowPrivileged: slices.Clone(exp.AllowPrivileged),
		ProjectName:     project,
	})
	out := make([]Refusal, 0, len(res.Findings))
	for _, f := range res.Findings {
		out = append(out, Refusal{Code: findingCode(f.Code), Detail: f.Detail})
	}
	return res.Services, out, res.Warnings
}

// findingCode maps a composecheck finding code to a refusal code. A code this
// package does not know is reported as COMPOSE_INVALID rather than dropped.
func findingCode(c codes.Code) codes.Code {
	switch c {
	case codes.ComposeInvalid, codes.UnresolvedVars, codes.Privileged, codes.ManifestPaths:
		return c
	}
	return codes.ComposeInvalid
}
