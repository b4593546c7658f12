// Command monky-deployd-tick is what the systemd timer runs: `monky-deployd run` for a
// box in its steady state, in a process that starts in a millisecond.
//
//	monky-deployd-tick run [--config PATH] [--metrics-file PATH]
//
// A tick on a box whose live release is up and confirmed, whose OpenBao token is not
// due for a lookup and whose state needs no repair is a check-in that tenancy answers
// with none. This binary does that tick itself: lock, state, the live release's health
// through the Engine API, the check-in, the state and the metrics, with the same
// packages the agent uses for them (internal/config, internal/state,
// internal/heartbeat), and exits 0 — or 75 when tenancy is unavailable, as the agent
// would. It links none of the agent's heavy dependencies (compose-go, the OpenZiti SDK,
// the OpenBao client), whose package initialisation alone costs more than the tick.
//
// Everything else it hands to the full agent, monky-deployd next to it, by exec with
// the same arguments: any other command or flag, the sdk transport, a config or state
// it does not accept as steady, a token due for a lookup, a docker version to read
// again, a live release to repair or to read through the CLI, a latch, a clock that
// went back, and every check-in answer but none or a temporary failure. It decides
// all but the last before it calls tenancy or reads docker; after the check-in the
// agent checks in again (a heartbeat twice, once per apply or down) and does what
// tenancy asked. A tick stopped by SIGTERM or SIGINT is never handed over: it exits 75
// (docs/ARCHITECTURE.md, "Two binaries").
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	r := tick(ctx, os.Args[1:], os.Environ(), os.Stderr)
	stop()
	if r.handover != "" {
		os.Exit(handOver(r, os.Args, os.Environ(), os.Stderr))
	}
	os.Exit(r.exit)
}
