// Command monky-deployd is the on-box pull agent for Monky backend environments.
//
//	monky-deployd run [--config PATH] [--loop [--interval D]] [--metrics-file PATH]
//	monky-deployd status [--config PATH] [--json]
//	monky-deployd bootstrap [--config PATH] [--grant PATH]
//	monky-deployd verify --env ENV [--sha SHA] [--json] [--allow-privileged SVC,…]
//	                     [--live-serial N] [--rollback] BUNDLE
//	monky-deployd version
//
// Exit codes: 0 done, 75 temporary (the timer retries), 78 AGENT_ENV_MISMATCH (never
// retried), 1 anything else, 2 a usage error.
//
// verify exits 0 when the bundle is accepted and 1 when it is refused, a file that is
// not a bundle at all included (its --json is still {"sha":"","refusals":[…],"warnings":[]}); a
// bundle file that cannot be opened is a usage error, 2. A result of verify, status or
// version that cannot be written to stdout (a closed pipe) exits 1, never a silent 0.
// run --loop (deployd.Agent.Loop) ends with 0 on SIGTERM or SIGINT, with 78 on
// AGENT_ENV_MISMATCH; its first tick starts within a tenth of --interval, and after a 75
// it waits --interval, doubled after each further 75 up to 15 minutes (±10% jitter).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
