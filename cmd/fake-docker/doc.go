// Command fake-docker is a fake docker program for hermetic tests: it records every
// invocation and plays docker compose from a script, with no docker daemon. Put it on
// PATH as "docker"; FAKE_DOCKER_LOG, FAKE_DOCKER_SCRIPT and FAKE_DOCKER_STATE control
// it, or, where they are not set (the agent passes docker none of them),
// fake-docker.json next to the program. It is fakedocker.Main of
// github.com/monky/monky-deployd/deployd/deploydtest/fakedocker, whose documentation
// has the commands and the script format (and docs/FAKES.md).
//
//	fake-docker serve-engine [-socket PATH] [-config FILE] [-watch-stdin=true]
//
// serves the fake docker Engine API over the same record, state and script on a unix
// socket, for harnesses in any language (docs/FAKES.md): it prints one JSON line,
//
//	{"docker_host":"unix:///tmp/fd123/docker.sock","socket":"/tmp/fd123/docker.sock","log":"…","state":"…","script":"…"}
//
// whose docker_host is the DOCKER_HOST to give the code under test, and serves until
// stdin closes or SIGTERM or SIGINT.
package main
