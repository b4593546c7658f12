//go:build !fakedocker_cli

package fakedocker

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/monky/monky-deployd/internal/fakes/stdinwatch"
)

// served is the one JSON line serve prints on stdout once the socket listens.
type served struct {
	// DockerHost is the DOCKER_HOST to give the code under test: "unix://" + Socket.
	DockerHost string `json:"docker_host"`
	// Socket is the unix socket's path.
	Socket string `json:"socket"`
	// Log, State and Script are the record, state and script the engine serves: the
	// same files as the program's.
	Log    string `json:"log"`
	State  string `json:"state"`
	Script string `json:"script"`
}

// serve is the program's serve-engine command (package doc, "The Engine API"): args
// are the arguments after serveCommand, exe the program's path. It serves until stdin
// closes (unless -watch-stdin=false) or ctx ends, and returns the exit code: 0 after a
// clean stop, 2 for a bad command line or nothing to serve, 1 when the socket cannot
// be served. The paths come from env, else from -config, else from the configFile
// beside exe; without -socket the socket is docker.sock in a new temporary directory,
// removed on exit.
func serve(ctx context.Context, exe string, args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(code int, err any) int {
		fmt.Fprintf(stderr, "fake docker %s: %v\n", serveCommand, err)
		return code
	}
	fs := flag.NewFlagSet("docker "+serveCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "the unix socket to serve on (default: docker.sock in a new temporary directory)")
	configPath := fs.String("config", "", "the fake docker's "+configFile+" (default: the one next to the program)")
	watchStdin := fs.Bool("watch-stdin", true, "stop when stdin closes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		return fail(2, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if *configPath == "" {
		*configPath = filepath.Join(filepath.Dir(exe), configFile)
	}
	cfg, err := readConfig(*configPath)
	if err != nil {
		return fail(2, err)
	}
	cfg = cfg.withEnv(envMap(env))
	if cfg.State == "" {
		return fail(2, fmt.Sprintf("no state to serve: neither %s nor %s is set and %s names no log or state; "+
			"write {\"log\":…,\"state\":…,\"script\":…} there, the file the program reads", envLog, envState, *configPath))
	}
	if *socket == "" {
		dir, err := os.MkdirTemp("", "fd")
		if err != nil {
			return fail(1, err)
		}
		defer func() { _ = os.RemoveAll(dir) }() // the socket is removed by Close; the directory is empty
		*socket = filepath.Join(dir, "docker.sock")
	}
	srv, err := serveEngine(*socket, cfg)
	if err != nil {
		return fail(1, err)
	}
	line, err := json.Marshal(served{DockerHost: "unix://" + srv.Socket, Socket: srv.Socket, Log: cfg.Log, State: cfg.State, Script: cfg.Script})
	if err == nil {
		_, err = fmt.Fprintf(stdout, "%s\n", line)
	}
	if err != nil {
		_ = srv.Close() // the write error is the one to report
		return fail(1, err)
	}
	ctx, cancel := stdinwatch.Context(ctx, stdin, *watchStdin)
	defer cancel()
	<-ctx.Done()
	if err := srv.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fail(1, fmt.Errorf("stopping: %w", err))
	}
	return 0
}
