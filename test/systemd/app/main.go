// Command app is the one service of the systemd box's test bundle (test/systemd): a
// static binary that `docker import` turns into an image, so that the box needs no
// registry. `app serve` waits for SIGTERM; `app health` (the healthcheck) succeeds when
// the secret the agent read from OpenBao reached the container's environment.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	cmd := "serve"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	switch cmd {
	case "serve":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		fmt.Println("app: serving until SIGTERM")
		<-sig
	case "health":
		if os.Getenv("DB_PASSWORD") == "" {
			fmt.Fprintln(os.Stderr, "app: DB_PASSWORD is empty")
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "app: unknown command %q (serve, health)\n", cmd)
		os.Exit(2)
	}
}
