package main

import (
	"fmt"
	"os"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

func main() {
	// The paths the environment does not set come from fake-docker.json next to the
	// program: the agent passes docker no FAKE_DOCKER_* variable.
	var cfg fakedocker.Config
	if exe, err := os.Executable(); err == nil {
		if cfg, err = fakedocker.ConfigNextTo(exe); err != nil {
			fmt.Fprintf(os.Stderr, "fake docker: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(fakedocker.MainConfig(cfg, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}
