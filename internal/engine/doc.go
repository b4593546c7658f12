// Package engine is a small typed client of the docker Engine API over net/http: the
// state of a compose project's containers (Containers, Inspect — a compose.Reader),
// the daemon's version, and the images and their removal by ID for image hygiene.
// It answers in milliseconds where `docker compose ps` starts a process (about 0.3 s
// and 48 MB), so the agent can read the health wait of an apply and the live health of
// every check-in through it. Changes (up, down) stay with the compose CLI.
//
// # Why not github.com/docker/docker/client
//
// The official client drags a large dependency tree into the agent (OpenTelemetry,
// containerd's and moby's type packages, go-connections, …) whose package
// initialisation runs in every process start, and the agent starts once per timer
// tick: its startup cost matters. We need five endpoints and a dozen fields. So this
// package speaks plain HTTP with the standard library and decodes only what it uses.
//
// # Unversioned paths, tolerant decoding
//
// Requests use unversioned paths (/containers/json, not /v1.41/containers/json): the
// daemon then answers in its own, newest API version. A pinned version cannot serve
// every box: Docker Engine 29 refuses API versions below 1.44, while Debian 12's
// docker.io 20.10 knows at most 1.41. The decoding is therefore tolerant: unknown
// fields are ignored, optional fields may be absent, and where the shape changed both
// shapes are read (a container's health comes from the Health object of API 1.52 and
// later, else from its status text "Up 3 minutes (healthy)"). DOCKER_API_VERSION is
// ignored for the same reason.
//
// # Where the daemon is
//
// The daemon to read is the one docker compose changes, so Resolve finds it as the
// docker CLI does, from the docker environment as deployd.DockerEnv returns it ("K=V"),
// never the process environment: a non-empty DOCKER_HOST; else DOCKER_CONTEXT; else the
// currentContext of config.json in DOCKER_CONFIG (or HOME/.docker); else the default,
// unix:///var/run/docker.sock. A context other than "default" is read from the CLI's
// context store, contexts/meta/<hex sha256 of the name>/meta.json, Endpoints.docker.Host
// (after `docker context use rootless` the agent reads the rootless daemon, as compose
// does). The client speaks unix:///path and tcp://host[:port] (port 2375 by default) in
// plain HTTP. Everything else matches ErrUnsupported, and the caller reads through the
// docker CLI instead: ssh://, npipe:// and fd:// hosts, and TLS (DOCKER_TLS_VERIFY or
// DOCKER_CERT_PATH with DOCKER_HOST or the default context; a context's TLS material or
// SkipTLSVerify). A context that does not exist, or a config.json or meta.json that does
// not parse, is an error naming the file.
//
// # Requests
//
// One http.Client per Client, with keep-alive (Close closes the idle connections) and
// no proxy from the environment. Every call takes a context and is bounded on its own
// by Options.Timeout. A response body larger than Options.MaxBody is an error, never
// silently cut.
//
// # Errors
//
// Every error is an *Error naming the operation, the host and the path; a daemon's
// refusal carries its HTTP status and its message ({"message": "…"}). errors.Is
// matches ErrUnsupported (New), ErrUnreachable (the daemon's socket could not be
// dialled), ErrNotFound (404) and ErrInUse (409: an image still used or still tagged
// in several repositories). No error holds a container's environment or label values:
// decoding errors say where the JSON broke, not what it held.
//
// # Compared with docker compose ps
//
// Containers gives what compose.ParsePS reads from `docker compose ps --all --format
// json` of the same containers in State, Health, ExitCode, Service, Name and Project,
// with two differences: the ID is the full one (compose 2.21 and later print 12
// characters), and a dead container's ExitCode is 0, because the container list carries
// an exit code only in an exited container's status text and compose inspects each
// container for it (Inspect gives it).
package engine
