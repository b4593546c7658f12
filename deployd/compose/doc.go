// Package compose runs docker compose for monky-deployd: up, down, ps (both JSON
// shapes), logs, the health wait, and the docker server version for the check-in.
//
// A Client runs the docker program as a subprocess with exactly the environment of
// Config.Env. The process environment is never inherited, because compose
// interpolates variables from it (docs/ARCHITECTURE.md): what the agent verified is what compose
// runs. The docker program itself is looked up in the PATH of Config.Env, never the
// agent's, and only in absolute PATH entries. Every call names the project
// (--project-name), its directory (--project-directory, also the working directory)
// and each compose file (-f, relative to the directory, in order) explicitly.
//
// Output is captured through a bounded ring buffer: a chatty compose costs at most
// Config.OutputLimit bytes (the tail is what a report carries). ps output is parsed
// whole and capped at 16 MiB. Cancelling the context kills the whole process group
// (docker and its compose plugin) with SIGKILL; a killed up leaves the project half
// applied, and the agent's next tick repairs it.
//
// A command's outcome is its exit status. docker's output goes through pipes the
// Client owns; once docker exited, its output may stay open at most 5 s (a child of
// docker holding it: a credential helper or plugin that lingers, a box too busy to
// let it finish), after which the Client closes its end and goes on with what it
// read (when /proc shows no holder, the Client may only have been too busy to read
// the rest, and it waits one more delay first). An exit 0 is then a success, logged
// as a warning that names the processes holding the output (from /proc, on Linux;
// Output.Lingered, Output.HeldBy); a non-zero exit is that exit's failure, with the
// output read so far in Output.Tail. ps and inspect, whose output is parsed whole,
// fail with ErrCommandFailed instead of parsing output that may be cut: the health
// wait reads again at its next poll.
// A docker that did not exit by itself (Output.ExitCode -1) is told apart by
// Output.Stop: killed by the Client when the context's deadline passed (a bound the
// caller set, such as the agent's 15 minutes for a pull or 5 s for a read) or by a
// signal the Client did not send (the OOM killer): ErrDockerTimeout, code
// DOCKER_TIMEOUT; killed because the context was cancelled: an error matching
// context.Canceled.
//
// # Health
//
// WaitHealthy polls ps --all until every expected service has containers that are all
// running and, where they have a healthcheck, healthy. A one-shot service whose
// container exited 0 counts as done. It fails fast with ErrUnhealthy (code UNHEALTHY)
// when a container is unhealthy, exited non-zero, dead or restarting, or when its
// uptime went backwards between two polls (docker restarted it: a restart loop that ps
// shows as running). Past the timeout it fails with ErrHealthTimeout (code
// HEALTH_TIMEOUT), naming the services still not ready; a service with no container at
// all is not ready, and its ServiceState says "missing". A ps call that fails during
// the wait is logged and retried at the next poll: a busy daemon is not a failed apply.
//
// Decisions where the contract is silent, chosen for an operator of a fleet:
//   - A restarting container fails the wait at once, even when its restart policy
//     might bring it up later: a service that crashes while the agent watches is not
//     one to promote, and failing fast keeps the old release serving sooner.
//   - A running container without a healthcheck counts as ready only once it was
//     seen running at two polls in a row, with its uptime not gone backwards, and has
//     run for a second (by docker's uptime or since the wait first saw it): a
//     container that crashes right after start is caught instead of promoted, even
//     when the polls, read through the Engine API, come 50 ms apart. A healthy
//     container is ready at once; its healthcheck proved it. Observe, a snapshot
//     between applies, counts every running container without a healthcheck as
//     ready.
//   - With no expected services, the wait covers every service ps shows; the agent
//     always passes the bundle's services, so that a service compose never created is
//     caught ("missing"). Services that are not meant to run (replicas: 0, a profile
//     that is not enabled) must be left out of WaitOptions.Services by the caller.
//   - A service with several containers is as ready as its worst container.
//
// # Errors
//
// Every failure is an *Error that names the operation and the services involved and
// matches one sentinel with errors.Is: ErrApplyFailed (up or down failed: code
// APPLY_FAILED), ErrCommandFailed (ps, logs or version failed or printed something
// unreadable: code APPLY_FAILED too, since in a tick they are part of an apply),
// ErrUnhealthy and ErrHealthTimeout; a pull's Kind is ErrImageMissing,
// ErrRegistryUnavailable, ErrDockerUnavailable, ErrPullFailed or ErrDockerTimeout (see
// Pull). The underlying cause (an exit status, ErrDockerTimeout, ErrDockerUnavailable,
// a context error, exec.ErrNotFound) is reachable with errors.Is and errors.As, and a
// cause of the box's gives Error.Code its code whatever the Kind (DOCKER_UNAVAILABLE,
// DISK_FULL, DOCKER_TIMEOUT). The health wait's own timeout is ErrHealthTimeout, never
// ErrDockerTimeout: a box cannot tell a slow start from a bad release. Error texts
// name services, files and the project, never output: the output is in Output.Tail,
// which the caller redacts before it reports it.
package compose
