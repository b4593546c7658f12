// Command fake-docker is a fake docker program for hermetic tests: it records every
// invocation and plays docker compose from a script, with no docker daemon. Put it on
// PATH as "docker"; FAKE_DOCKER_LOG, FAKE_DOCKER_SCRIPT and FAKE_DOCKER_STATE control
// it, or, where they are not set (the agent passes docker none of them),
// fake-docker.json next to the program. The behaviour and the script format are
// documented in github.com/monky/monky-deployd/internal/fakes/fakedocker.
package main
