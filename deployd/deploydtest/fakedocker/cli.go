//go:build fakedocker_cli

package fakedocker

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// This file stands in for engine.go and serve.go in the program that Build builds
// (-tags fakedocker_cli): the docker commands alone, which Install runs hundreds of
// times in a test, start in about half the time without net/http linked. Install
// serves the Engine API from the caller's process; a harness that wants serve-engine
// runs cmd/fake-docker built without the tag (go install).

// errNoEngine is what the CLI build says of the Engine API.
var errNoEngine = errors.New("this build of the fake docker program has no Engine API (built with -tags fakedocker_cli); " +
	"go install " + ProgramPackage + " for serve-engine")

// engineServer is never served in the CLI build.
type engineServer struct{ Socket string }

// Close is a no-op.
func (*engineServer) Close() error { return nil }

// serveEngine refuses: Install, in a program built with the tag, has no engine.
func serveEngine(string, config) (*engineServer, error) { return nil, errNoEngine }

// serve refuses the serve-engine command with exit code 2.
func serve(_ context.Context, _ string, _, _ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintf(stderr, "fake docker %s: %v\n", serveCommand, errNoEngine)
	return 2
}
