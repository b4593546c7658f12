// Package fakedocker installs monky-deployd's fake docker for a test or a program of
// any module: the docker program (compose up, down, ps, logs, inspect, version, played
// from a Script, every call recorded) and the docker Engine API over the same state on
// a unix socket, so that an agent — in-process, or the agent binary — applies bundles
// end to end with no docker daemon. It needs no testing.TB and links no "testing".
//
//	d, err := fakedocker.Install(ctx, fakedocker.Options{Script: &fakedocker.Script{…}})
//	if err != nil { … }
//	defer d.Close()
//	agent, err := deployd.New(ctx, cfg, deployd.Options{DockerEnv: d.Env()})
//	// … ticks …
//	calls, err := d.Calls()   // what docker was asked, Engine API requests included
//
// Env gives PATH (the program, named docker) and DOCKER_HOST (the Engine API); the
// program finds its record, state and script in the fake-docker.json beside it, so the
// code under test needs none of the fake's own variables. Install builds the program
// once per process with the go tool (Build), or takes Options.Program.
//
// What the fake plays, and what it does not model (pulls, networks, real timing,
// several projects at once), is in docs/FAKES.md; a harness in another language runs
// the same program, and its Engine API with `fake-docker serve-engine`.
package fakedocker
