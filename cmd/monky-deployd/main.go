// Command monky-deployd is the on-box pull agent for Monky backend environments.
//
//	monky-deployd run [--config PATH] [--loop] [--metrics-file PATH]
//	monky-deployd status [--config PATH] [--json]
//	monky-deployd bootstrap [--config PATH] [--grant PATH]
//	monky-deployd verify --env ENV [--sha SHA] [--json] BUNDLE
//	monky-deployd version
//
// Exit codes: 0 done, 75 temporary (the timer retries), 78 AGENT_ENV_MISMATCH (never
// retried), 1 anything else, 2 a usage error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
