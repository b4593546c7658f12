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
// once per process with the go tool (Build), or takes Options.Program: a program built
// beforehand, or the caller's own binary, which plays docker when it is run under that
// name (Main; examples/quickstart does so).
//
// What the fake plays, and what it does not model (pulls, networks, real timing,
// several projects at once), is in docs/FAKES.md; a harness in another language runs
// the same program, and its Engine API with `fake-docker serve-engine`.
//
// # What it understands
//
//	docker compose [--project-name P] [--project-directory D] [-f FILE]... up -d --remove-orphans
//	docker compose ... down --remove-orphans [-v]
//	docker compose ... ps --all --format json
//	docker compose ... logs --no-color --tail N [SERVICE...]
//	docker compose ... [--profile P]... run --rm --no-deps -T --name NAME SERVICE
//	docker rm -f [--] NAME...
//	docker compose version [--short]
//	docker inspect --type container ID|NAME...
//	docker image inspect --format {{.Id}} [--] REF...
//	docker pull [--] REF
//	docker version [--format TEMPLATE]
//
// Anything else, including an unknown flag, exits 1 with a message on stderr, so that
// a wrong argv in the code under test shows up as a failure rather than being ignored.
//
// # Environment
//
// The program (Main, cmd/fake-docker) reads:
//
//	FAKE_DOCKER_LOG     file that receives one JSON line per invocation (appended)
//	FAKE_DOCKER_SCRIPT  JSON script of compose behaviour (optional)
//	FAKE_DOCKER_STATE   state kept between invocations (default: FAKE_DOCKER_LOG + ".state")
//
// Every invocation appends one line (a Call) to FAKE_DOCKER_LOG with a single write on
// a file opened with O_APPEND, so concurrent calls never interleave:
//
//	{"argv":["compose","--project-name","monky",...],"dir":"/srv/monky/current","env":["FAKE_DOCKER_LOG","PATH"],"time":"2026-11-30T09:00:00.123Z"}
//
// # Without the variables
//
// A program that runs docker with a clean environment (the agent binary gives docker
// only the variables the docker CLI reads, deployd.DockerEnv) passes no FAKE_DOCKER_*.
// The program then reads fake-docker.json in the directory of its executable, and
// takes the paths from it where the environment sets none:
//
//	{"log":"/tmp/t/docker.log","state":"/tmp/t/docker.state","script":"/tmp/t/script.json"}
//
// The script there is read only once the file exists. Put the program beside the file
// as a copy or a hard link, never a symlink (os.Executable resolves it); Install does
// so for every Docker.
//
// The state file (Status) is updated under an exclusive flock of "<state>.lock" and
// replaced by atomic rename. With neither FAKE_DOCKER_LOG nor FAKE_DOCKER_STATE set,
// nothing is kept: every call sees the project as freshly up.
//
// # Without a script
//
// Every command succeeds. up reads the compose files named by -f (relative to
// --project-directory; compose.yaml and friends when no -f is given) just enough to
// learn the service names and which declare a healthcheck; ps then shows every service
// running, healthy where it has a healthcheck. Before the first up and after down, ps
// shows no containers (no output at all, or "[]" in the array shape).
//
// # The script
//
// FAKE_DOCKER_SCRIPT names a JSON document that decodes into Script, with the JSON
// names of its fields (an unknown field is an error, and Script.Validate must pass);
// Script, Command, Service, State and Hook say what each field plays:
//
//	{
//	  "ps_format": "lines",
//	  "server_version": "27.3.1",
//	  "commands": {
//	    "up":   {"stderr": "Error response from daemon: pull access denied\n", "exit": 1, "fail_times": 1},
//	    "ps":   {"delay": "2s"}
//	  },
//	  "services": {
//	    "web":     {"states": [{"health": "starting", "times": 3}, {"health": "healthy"}],
//	                "logs": "listening on :8080\n"},
//	    "migrate": {"states": [{"state": "exited", "exit_code": 0}]},
//	    "worker":  {"states": [{"status": "Up 10 seconds"}, {"status": "Up 1 second"}]}
//	  }
//	}
//
// A scripted command's delay is slept after the call was recorded, so that a test can
// kill the caller mid-call. inspect shows the state of the last ps call; ps without
// --all hides containers that are not running, as compose does. A run of a service
// behind a profile needs that profile among the --profile flags, as compose does; up
// leaves such services out. docker rm finds no container (a run keeps none) and says
// so.
//
// # The Engine API
//
// Install serves the fake docker Engine API on Docker.Socket, over the same record,
// state and script as the program (those of its fake-docker.json): GET|HEAD /_ping, GET
// /version, GET /info, GET /containers/json (all=1, filters by label and status), GET
// /containers/{id}/json, GET /images/json and DELETE /images/{id}, unversioned or
// under /v1.NN. A GET /containers/json is one ps step: it advances the same counter
// as docker compose ps, so a script plays the same whichever way it is read, and GET
// /containers/{id}/json is the object docker inspect prints, in the state of the last
// step. Every request appends a Call with argv ["engine", METHOD, PATH] and the raw
// query in Call.Query. The script's version, ps and inspect commands (delays,
// failures) play for GET /version, /containers/json and /containers/{id}/json too
// (Call.EngineCommand), a failure as a 500 with the command's stderr; the others are
// the program's only.
//
// The program's serve-engine command (docker serve-engine [-socket PATH] [-config FILE]
// [-watch-stdin=true]) serves the same Engine API on a unix socket for a harness that
// is not written in Go, over the paths the program itself would use, announced by one
// JSON line on stdout (docker_host, socket, log, state, script) and served until stdin
// closes or a signal.
//
// Images: every up learns the image of each service (its image in the compose
// files, "<project>-<service>" for one compose would build, or the script's) with ID
// ImageID(ref), and keeps it after down and after an up of another release, until
// DELETE /images/{id} removes it: by ID only (a full ID or a prefix of 12 hex digits or
// more), 409 while a running container of the project uses it (or a stopped one,
// without force=1), 404 for an unknown ID. docker pull learns its image the same way,
// unless Script.MissingImages names it. docker image inspect finds the images held,
// and says "No such image" of the others.
package fakedocker
