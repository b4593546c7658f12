package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

func main() {
	exe, exeErr := os.Executable()
	if len(os.Args) > 1 && os.Args[1] == fakedocker.ServeCommand {
		// The Engine API over the same record, state and script, for a harness.
		if exeErr != nil {
			fmt.Fprintf(os.Stderr, "fake docker: %v\n", exeErr)
			os.Exit(1)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := fakedocker.Serve(ctx, exe, os.Args[2:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	// The paths the environment does not set come from fake-docker.json next to the
	// program: the agent passes docker no FAKE_DOCKER_* variable.
	var cfg fakedocker.Config
	if exeErr == nil {
		var err error
		if cfg, err = fakedocker.ConfigNextTo(exe); err != nil {
			fmt.Fprintf(os.Stderr, "fake docker: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(fakedocker.MainConfig(cfg, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}
