package main

import (
	"os"

	"github.com/monky/monky-deployd/internal/fakes/fakedocker"
)

func main() { os.Exit(fakedocker.Main(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)) }
