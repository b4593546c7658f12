package main

import "github.com/monky/monky-deployd/deployd/deploydtest/fakedocker"

func main() { fakedocker.Main() }
