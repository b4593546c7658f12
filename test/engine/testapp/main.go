// Command testapp is the one program inside the images of the real-engine tests
// (test/engine): the tests build it as a static binary and `docker import` it as
// /app, so that no image is ever pulled. Its behaviour is chosen by its arguments and
// by environment variables that the bundle's compose file sets.
//
//	/app serve           run until SIGTERM; ready (see health) after READY_AFTER
//	/app health          the healthcheck: exit 0 when serve is ready and HEALTHY is not
//	                     "0"; otherwise print why and exit 1
//	/app exit N          print a line and exit with code N (a one-shot service)
//	/app envhash NAME    print the sha256 of the environment variable NAME, so that a
//	                     test checks a secret reached the container without printing it
//	/app hook NAME       a hook (docs/BUNDLE.md, "Hooks"): print NAME=<its value> (a
//	                     secret, that the agent must redact) and exit with HOOK_EXIT
//	                     (default 0); with HOOK_MARK, the first run (no file there
//	                     yet) writes it, sleeps HOOK_SLEEP and, with HOOK_FIRST_EXIT,
//	                     exits with that, so that a test kills the agent inside it,
//	                     or has it ask for later (75) once
//
// serve writes /tmp/ready once READY_AFTER (a Go duration, default 0) has passed, and
// prints one line per second of "serving" with its service name (SERVICE).
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

const readyFile = "/tmp/ready"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: app serve|health|exit N|envhash NAME")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "health":
		os.Exit(health())
	case "exit":
		code := 0
		if len(os.Args) > 2 {
			code, _ = strconv.Atoi(os.Args[2])
		}
		fmt.Printf("one-shot %s exits with code %d\n", os.Getenv("SERVICE"), code)
		os.Exit(code)
	case "hook":
		if len(os.Args) < 3 {
			os.Exit(2)
		}
		code, _ := strconv.Atoi(os.Getenv("HOOK_EXIT"))
		if mark := os.Getenv("HOOK_MARK"); mark != "" {
			if _, err := os.Stat(mark); err != nil {
				_ = os.WriteFile(mark, []byte("ran\n"), 0o644) // no mark: every run sleeps, the test times out
				sleep, _ := time.ParseDuration(os.Getenv("HOOK_SLEEP"))
				fmt.Printf("hook %s: first run, sleeping %s\n", os.Getenv("SERVICE"), sleep)
				time.Sleep(sleep)
				if first := os.Getenv("HOOK_FIRST_EXIT"); first != "" {
					code, _ = strconv.Atoi(first)
				}
			}
		}
		fmt.Printf("hook %s running\n%s=%s\n", os.Getenv("SERVICE"), os.Args[2], os.Getenv(os.Args[2]))
		fmt.Printf("hook %s exits with code %d\n", os.Getenv("SERVICE"), code)
		os.Exit(code)
	case "envhash":
		if len(os.Args) < 3 {
			os.Exit(2)
		}
		v, ok := os.LookupEnv(os.Args[2])
		if !ok {
			fmt.Println("unset")
			return
		}
		sum := sha256.Sum256([]byte(v))
		fmt.Println(hex.EncodeToString(sum[:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func serve() {
	if err := os.MkdirAll("/tmp", 0o1777); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	_ = os.Remove(readyFile)
	delay, _ := time.ParseDuration(os.Getenv("READY_AFTER"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Printf("%s starting, ready after %s\n", os.Getenv("SERVICE"), delay)
	ready := time.After(delay)
	tick := time.NewTicker(time.Second)
	for {
		select {
		case <-ready:
			if err := os.WriteFile(readyFile, []byte("ok\n"), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			fmt.Printf("%s ready\n", os.Getenv("SERVICE"))
		case <-tick.C:
			fmt.Printf("%s serving\n", os.Getenv("SERVICE"))
		case s := <-sig:
			fmt.Printf("%s stopping on %s\n", os.Getenv("SERVICE"), s)
			return
		}
	}
}

func health() int {
	if os.Getenv("HEALTHY") == "0" {
		fmt.Printf("health of %s: dependency check failed: connection refused (HEALTHY=0)\n", os.Getenv("SERVICE"))
		return 1
	}
	if _, err := os.Stat(readyFile); err != nil {
		fmt.Printf("health of %s: not ready yet\n", os.Getenv("SERVICE"))
		return 1
	}
	fmt.Printf("health of %s: ok\n", os.Getenv("SERVICE"))
	return 0
}
