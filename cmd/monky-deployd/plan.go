package main

import (
	"context"
	"encoding/json"

	"github.com/monky/monky-deployd/deployd"
)

// exitPlanChanges is plan's exit code when an apply would change something (as
// `terraform plan -detailed-exitcode`); it is also the code of a usage error, which
// prints no plan on stdout.
const exitPlanChanges = 2

// plan is `monky-deployd plan [--config PATH] [--json]` (docs/PLAN.md): check in,
// verify the published bundle and print what an apply would change. Exit 0: nothing
// would change; 2: something would; 1: the bundle is refused; otherwise a tick's
// code (75 temporary, 78 latched env mismatch).
func (c *cli) plan(ctx context.Context, args []string) int {
	fs := c.flags("plan")
	configPath := fs.String("config", deployd.DefaultConfigPath, "config file")
	asJSON := fs.Bool("json", false, `print the plan as JSON ({"schema":1,…})`)
	return c.withAgent(ctx, fs, args, configPath, func(a *deployd.Agent, _ deployd.Config) int {
		p, err := a.Plan(ctx)
		refused := err != nil && len(p.Refusals) > 0
		if err != nil && !refused {
			code := deployd.ExitCode(err)
			c.log.Error("plan failed: nothing was changed", "code", deployd.CodeOf(err), "err", err, "exit", code)
			return code
		}
		var out string
		if *asJSON {
			data, _ := json.Marshal(p) // plain strings, numbers and lists
			out = string(data) + "\n"
		} else {
			out = p.Text()
		}
		out = c.red.Redact(out)
		if code := c.output(out); code != 0 {
			return code
		}
		switch {
		case refused:
			return deployd.ExitFailed
		case p.Changes:
			return exitPlanChanges
		default:
			return deployd.ExitOK
		}
	})
}
