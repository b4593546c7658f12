// Command monky-deployd is the on-box pull agent for Monky backend environments.
//
//	monky-deployd run [--config PATH] [--loop [--interval D]] [--metrics-file PATH]
//	monky-deployd status [--config PATH] [--json]
//	monky-deployd plan [--config PATH] [--json]
//	                   what an apply would change: exit 0 nothing, 2 changes, 1 refused
//	monky-deployd bootstrap [--config PATH] [--grant PATH] [--force]
//	monky-deployd hold [--config PATH] [--for D --reason TEXT | --clear]
//	                   hold the box (no switch to a new release) for D, clear it, or show it
//	monky-deployd verify --env ENV [--sha SHA] [--json] [--allow-privileged SVC,…]
//	                     [--live-serial N] [--rollback] [--key PUBKEY]… [--sig FILE] BUNDLE
//	monky-deployd pack --out BUNDLE [--json] DIR
//	monky-deployd sign --key PRIVATE_KEY_FILE [--expires D|TIME] [--env ENV] [--out FILE]
//	                   [--json] BUNDLE
//	monky-deployd keygen --out PRIVATE_KEY_FILE
//	monky-deployd version
//	monky-deployd help [COMMAND]
//	                   this text, or a command's usage and flags (as COMMAND --help)
//
// The list is the usage text of cli.go, which `monky-deployd help` prints (a test
// keeps the two the same).
//
// Exit codes: 0 done, 75 temporary (the timer retries), 78 AGENT_ENV_MISMATCH (never
// retried), 1 anything else, 2 a usage error. COMMAND --help (or -h) prints the
// command's usage and flags on stdout and exits 0.
//
// verify exits 0 when the bundle is accepted and 1 when it is refused, a file that is
// not a bundle at all included (its --json is still {"sha":"","refusals":[…],"warnings":[]}); a
// bundle file that cannot be opened is a usage error, 2. A result of verify, status or
// version that cannot be written to stdout (a closed pipe) exits 1, never a silent 0.
// hold is for the person at the box (root or a member of group monky-hold): --for D
// --reason TEXT sets a hold (cut to holds.max) and prints one line, until when and what
// waits; --clear clears it; alone it shows it. While held, an apply is prepared but not
// switched (docs/OPERATIONS.md, "Holds and windows").
//
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
