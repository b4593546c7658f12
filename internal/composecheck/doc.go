// Package composecheck is the compose-aware part of bundle verification (docs/BUNDLE.md): it
// loads a bundle's compose files from memory with compose-go v2, as `docker compose`
// would in the release directory, and reports COMPOSE_INVALID, UNRESOLVED_VARS,
// PRIVILEGED and MANIFEST_PATHS findings, plus the list of services.
//
// Nothing is read from the disk, the process environment or the network: the files are
// loaded under their bundle paths, with a fake release directory (ReleaseDir plus a
// random suffix per Check, so that no compose file can write it as an absolute path
// and pass a host directory off as the release) as the project directory and an
// explicit environment (manifest vars, secret names with a placeholder value, and
// COMPOSE_PROJECT_NAME). compose-go is kept from resolving env_file and label_file.
//
// # Unresolved variables
//
// compose-go substitutes "" for an unset ${X} and only logs a warning (docs/ARCHITECTURE.md), so
// the load is never trusted to fail. Every scalar value of every compose file (the
// positions compose interpolates: image, environment, command, labels, volumes in both
// syntaxes, ports, x- extensions, ...; map keys are not interpolated) is evaluated by a
// strict re-implementation of compose-go's substitution that records, per file, each
// variable that would become "" or fail: a plain ${X} or $X that neither vars nor
// secrets provide, and ${X:?msg} / ${X?msg} with X unset (or empty, for ":?"). A
// default (${X:-d}, ${X-d}) or a presence value (${X:+v}, ${X+v}) resolves it, but a
// variable used inside the default or presence value must itself resolve when compose
// would evaluate it. $$ is a literal. A variable taken from the environment without
// a $ is unresolved as well when vars and secrets do not provide it: "NAME" in an
// environment or build.args list, "NAME:" (null) in such a mapping, and the
// environment source of a top-level secret or config. The agent runs compose with an
// explicit environment, so such a variable would silently be empty. One finding per
// file and variable lists the key paths where it is used (an anchor's values are
// listed at the anchor). The load itself runs with the same resolver, silently; when
// variables are unresolved and the load then fails (for example, a bind source that
// became empty), no extra COMPOSE_INVALID is reported: UNRESOLVED_VARS says what to
// fix. Variables inside env_file contents are not checked (the file is only parsed).
//
// # Files outside the bundle
//
// include and extends.file make compose-go read other files from the disk; they are
// refused as COMPOSE_INVALID (naming the file and the key) and the file is not loaded.
// A bundle lists all its compose files in compose_files instead; extends of a service
// of the same file is fine. An env_file or label_file must resolve to a file of the
// bundle (MANIFEST_PATHS otherwise), with one exception: env_file ".env" names the
// .env file the agent renders into every release. Env files are parsed with
// compose-go's dotenv parser (COMPOSE_INVALID when they do not parse).
//
// # Privilege scan
//
// The scan runs on the normalised model after the load, so short and long volume
// syntax, relative paths and overrides across several compose files are judged the
// same way. It covers services and jobs, including those behind a profile (an operator
// may enable one), and pre_start hooks. PRIVILEGED findings:
//
//   - privileged: true (also on post_start/pre_stop hooks); any cap_add;
//   - network_mode, pid, ipc, uts, userns_mode or cgroup "host", and the legacy net:
//     host; a service attached to the host network (driver host or external "host");
//   - network_mode, pid or ipc "container:<x>" and volumes_from "container:<x>": they
//     join a container outside the project, whose privileges are unknown. The
//     "service:<x>" forms are allowed: the other service is scanned itself;
//   - devices, device_cgroup_rules, gpus, deploy.resources.reservations.devices;
//   - security_opt that turns a confinement off: seccomp, apparmor or systempaths
//     unconfined (with "=" or ":"), label=disable, label=type:spc_t or an
//     unconfined_t type, and a seccomp profile file (any seccomp value but builtin:
//     the bundle's own profile may allow every syscall);
//   - bind mounts whose normalised source is outside ReleaseDir (absolute host paths,
//     "../" escapes, "~"), with the docker socket (any docker.sock) and other *.sock
//     named explicitly; a bind of the release directory itself or of its .env (the
//     rendered .env holds every secret of the environment, not only those the service
//     names); npipe mounts; named volumes of the local driver that bind a
//     host path (driver_opts o=bind with a device) or mount a host device or path
//     (a device starting with "/", but not a "//server/share" network share);
//     use_api_socket;
//   - secrets and configs whose file is outside the release or is the release's
//     .env (every secret of the environment, as with a bind mount of it);
//   - builds (docker compose up builds a missing image, as root, on the box): a
//     local build context or dockerfile outside the release, build.privileged, any
//     build.entitlements, build.network host, additional_contexts that are local
//     paths outside the release, build.ssh forwarding the agent's ssh-agent or
//     reading a key outside the release, build.secrets whose file is outside the
//     release, and cache_from/cache_to of type local (a host directory);
//   - when the bundle has secrets, a build context that is the release directory
//     (build: ., or an additional_contexts entry .) and whose ignore file does not
//     exclude .env: the builder receives the rendered .env and a COPY . bakes every
//     secret of the environment into an image layer. The ignore file is the one
//     BuildKit uses: <dockerfile>.dockerignore next to the Dockerfile when the bundle
//     has it, else the context's .dockerignore (an additional context reads only its
//     .dockerignore); patterns follow the builder's rules (moby/patternmatcher:
//     comments, "**", "!" exceptions, the last match wins). A context of a
//     subdirectory never holds .env; a context outside the release (a parent of it,
//     an absolute path) is refused as outside; a git or http context is fetched by
//     the builder and holds no file of the release. Without secrets the .env holds
//     only vars, which the bundle shows anyway, and build: . stays allowed;
//   - provider services (they run a program on the host);
//   - any setting above whose value comes from a secret variable (the load sees a
//     placeholder, and the value OpenBao returns at apply time would decide it): a
//     bind or volume source, network_mode/pid/ipc/uts/userns_mode/cgroup,
//     security_opt, volumes_from, a secret or config file, a named volume's
//     driver_opts, the build section. Secrets belong in environment values, labels
//     and commands.
//
// sysctls are allowed: docker only accepts namespaced sysctls, which change the
// container's own namespaces, not the host's.
//
// A service or job named in AllowPrivileged gets no PRIVILEGED finding at all,
// docker socket included: privileged: true is already root on the host, so refusing
// the socket to a service the operator trusts with privileges would add no safety.
// MANIFEST_PATHS and COMPOSE_INVALID still apply to it.
//
// Details name files, services, keys, capability names and container paths (bind
// targets, as written in the compose file: ${X} stays ${X}); never the value of a
// variable, and never the raw text of a compose-go error, which may quote one. A bind
// refused as outside the release names the variables its source is written with
// ("its source comes from ${PLEX_MEDIA_PATH}") or says it is a home directory (~).
package composecheck
