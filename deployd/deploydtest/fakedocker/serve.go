package fakedocker

import (
	"cmp"
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

// serveCommand is the first argument that makes the fake docker program serve its
// Engine API (serve) instead of playing a docker command. No docker command has this
// name, so the code under test cannot run it by mistake; its runs are not recorded.
const serveCommand = "serve-engine"

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

// serve is the fake docker program's serve-engine command, for harnesses in any
// language: it serves newEngine on a unix socket over the same record, state and
// script as the program, prints one JSON line (served) on stdout, and serves until
// stdin closes (so a harness that dies takes it along; -watch-stdin=false turns that
// off), or until ctx ends (the program's SIGTERM or SIGINT); it returns the exit code:
// 0 after a clean stop, 2 for a bad command line or nothing to serve, 1 when the socket
// cannot be served.
//
//	docker serve-engine [-socket PATH] [-config FILE] [-watch-stdin=true]
//
// args are the arguments after serveCommand. The paths come from FAKE_DOCKER_LOG,
// FAKE_DOCKER_STATE and FAKE_DOCKER_SCRIPT in env where set, else from -config, else
// from configFile in the directory of exe (the program's path, os.Executable), as the
// program itself finds them. Without -socket the socket is docker.sock in a new
// directory under os.TempDir (a socket path is at most 107 bytes), removed on exit.
func serve(ctx context.Context, exe string, args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("docker "+serveCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "the unix socket to serve on (default: docker.sock in a new temporary directory)")
	configPath := fs.String("config", "", "the fake docker's "+configFile+" (default: the one next to the program)")
	watchStdin := fs.Bool("watch-stdin", true, "stop when stdin closes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fake docker %s: unexpected argument %q\n", serveCommand, fs.Arg(0))
		return 2
	}
	if *configPath == "" {
		*configPath = filepath.Join(filepath.Dir(exe), configFile)
	}
	cfg, err := readConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "fake docker %s: %v\n", serveCommand, err)
		return 2
	}
	vars := envMap(env)
	cfg = config{Log: cmp.Or(vars[envLog], cfg.Log), State: cmp.Or(vars[envState], cfg.State), Script: cmp.Or(vars[envScript], cfg.Script)}
	if cfg.State == "" && cfg.Log != "" {
		cfg.State = cfg.Log + ".state"
	}
	if cfg.State == "" {
		fmt.Fprintf(stderr, "fake docker %s: no state to serve: neither %s nor %s is set and %s names no log or state; "+
			"write {\"log\":…,\"state\":…,\"script\":…} there, the file the program reads\n", serveCommand, envLog, envState, *configPath)
		return 2
	}
	if *socket == "" {
		dir, err := os.MkdirTemp("", "fd")
		if err != nil {
			fmt.Fprintf(stderr, "fake docker %s: %v\n", serveCommand, err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }() // the socket is removed by Close; the directory is empty
		*socket = filepath.Join(dir, "docker.sock")
	}
	srv, err := serveEngine(*socket, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fake docker %s: %v\n", serveCommand, err)
		return 1
	}
	line, err := json.Marshal(served{DockerHost: srv.DockerHost(), Socket: srv.Socket, Log: cfg.Log, State: cfg.State, Script: cfg.Script})
	if err == nil {
		_, err = fmt.Fprintf(stdout, "%s\n", line)
	}
	if err != nil {
		_ = srv.Close() // the write error is the one to report
		fmt.Fprintf(stderr, "fake docker %s: %v\n", serveCommand, err)
		return 1
	}
	ctx, cancel := stdinwatch.Context(ctx, stdin, *watchStdin)
	defer cancel()
	<-ctx.Done()
	if err := srv.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		fmt.Fprintf(stderr, "fake docker %s: stopping: %v\n", serveCommand, err)
		return 1
	}
	return 0
}
