#!/usr/bin/env bash
# scenario.sh — a box's life driven from a shell, with the shipped binaries alone, as a
# suite in any language drives them (docs/FAKES.md, "A whole apply from a shell"):
# monky-fakes (fake tenancy + OpenBao + their admin API), fake-docker as the box's
# docker (the CLI on compose.docker, its Engine API served by `serve-engine` and named
# by DOCKER_HOST) and the agent binary, monky-deployd, run as the timer runs it.
#
#   1. apply a bundle with a secret (the agent bootstraps from its grant);
#   2. an idle tick: no lease, no compose, the live health read through the Engine API;
#   3. an unhealthy release fails (UNHEALTHY) and the box goes back to the first one;
#   4. down with purge.
#
# Usage: bash test/shell/scenario.sh. It builds the three binaries with `go build` into
# a temporary directory first (or takes them from $SCENARIO_BIN, a directory holding
# monky-deployd, monky-fakes and fake-docker). Needs bash 5, curl, tar, coreutils. It
# changes nothing outside its temporary directory, and every process it starts stops
# with it: each fake reads its stdin from this script, and exits when it closes.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
env_id=env-dev-01
canary="scenario-canary-$RANDOM$RANDOM-db-password"

say() { printf '\n== %s\n' "$*"; }
ok() { printf 'ok   %s\n' "$*"; }
fail() {
	printf 'FAIL %s\n' "$*" >&2
	exit 1
}

for tool in curl tar sha256sum find sort xargs; do
	command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed (apt-get install curl tar coreutils findutils)"
done
[ "${BASH_VERSINFO[0]}" -ge 5 ] || fail "bash 5 is needed (wait on a process substitution), this is $BASH_VERSION"

work=$(mktemp -d)
fakes_pid="" engine_pid=""
cleanup() {
	local rc=$?
	# Closing their stdin stops both fakes; a fake that is still up after 5 s is killed.
	if [ -n "${fakes_in:-}" ]; then exec {fakes_in}>&-; fi
	if [ -n "${engine_in:-}" ]; then exec {engine_in}>&-; fi
	for pid in $fakes_pid $engine_pid; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill "$pid" 2>/dev/null || true
	done
	if [ "$rc" -ne 0 ]; then
		for f in "$work"/agent-*.log "$work"/fakes.err "$work"/engine.err; do
			[ -s "$f" ] || continue
			printf '\n--- %s (last 40 lines)\n' "${f#"$work"/}" >&2
			tail -40 "$f" >&2
		done
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT

# field KEY JSON prints the string or number value of the first "KEY" in JSON (flat
# values only: enough for the lines and answers of the fakes, with no jq).
field() {
	local re="\"$1\":[[:space:]]*(\"([^\"]*)\"|(-?[0-9]+)|(true|false))"
	[[ $2 =~ $re ]] || fail "no \"$1\" in $2"
	printf '%s' "${BASH_REMATCH[2]}${BASH_REMATCH[3]}${BASH_REMATCH[4]}"
}

# count STRING FILE-OR-TEXT: how many times STRING occurs.
count() { grep -oF -- "$1" <<<"$2" | wc -l; }

# wait_line FILE: waits (10 s at most) for the first line a fake prints, and prints it.
wait_line() {
	for _ in $(seq 100); do
		if [ -s "$1" ] && [ "$(tail -c1 "$1" | od -An -c | tr -d ' ')" = '\n' ]; then
			head -1 "$1"
			return
		fi
		sleep 0.1
	done
	fail "no line in $1 after 10 s"
}

# --- the binaries ---------------------------------------------------------------------
say "build monky-deployd, monky-fakes and fake-docker"
bin=${SCENARIO_BIN:-$work/build}
if [ -z "${SCENARIO_BIN:-}" ]; then
	(cd "$repo" && go build -o "$bin/" ./cmd/monky-deployd ./cmd/monky-fakes ./cmd/fake-docker)
fi
for b in monky-deployd monky-fakes fake-docker; do
	[ -x "$bin/$b" ] || fail "$bin/$b is not an executable"
done
ok "binaries in $bin"

# --- the fake docker ------------------------------------------------------------------
say "the box's docker: fake-docker as docker, its fake-docker.json, its Engine API"
# The agent gives docker only the variables the docker CLI reads (never FAKE_DOCKER_*),
# so the fake finds its record, state and script in fake-docker.json beside it: a copy,
# not a symlink (it looks next to its resolved path).
dbin="$work/docker-bin"
mkdir -p "$dbin"
cp "$bin/fake-docker" "$dbin/docker"
cat >"$dbin/fake-docker.json" <<EOF
{"log": "$work/docker.log", "state": "$work/docker.state", "script": "$work/script.json"}
EOF
# serve-engine reads the same file and serves the same state on a unix socket. Its
# stdin is this script's file descriptor engine_in: when the script ends, however it
# ends, the descriptor closes and the engine stops.
exec {engine_in}> >(exec "$dbin/docker" serve-engine >"$work/engine.json" 2>"$work/engine.err")
engine_pid=$!
engine_line=$(wait_line "$work/engine.json")
docker_host=$(field docker_host "$engine_line")
socket=$(field socket "$engine_line")
[ "$docker_host" = "unix://$socket" ] || fail "docker_host $docker_host is not unix://$socket"
[ -S "$socket" ] || fail "$socket is not a socket"
ping=$(curl -sSf --unix-socket "$socket" http://docker/_ping)
[ "$ping" = OK ] || fail "the fake engine answers $ping to /_ping"
ok "fake engine on $docker_host"

# --- the fakes ------------------------------------------------------------------------
say "monky-fakes: fake tenancy and fake OpenBao"
exec {fakes_in}> >(exec "$bin/monky-fakes" >"$work/fakes.json" 2>"$work/fakes.err")
fakes_pid=$!
fakes_line=$(wait_line "$work/fakes.json")
tenancy=$(field tenancy_url "$fakes_line")
bao=$(field bao_addr "$fakes_line")
admin=$(field admin_url "$fakes_line")
ok "tenancy $tenancy, OpenBao $bao, admin $admin"

# --- the box --------------------------------------------------------------------------
cfg="$work/config.yaml"
cat >"$cfg" <<EOF
env_id: $env_id
deploy_dir: $work/srv
state_dir: $work/state
bootstrap_grant: $work/bootstrap.jwt
min_free_mb: 1
tenancy:
  transport: system
  url: $tenancy
  timeout: 10s
bao:
  addr: $bao
compose:
  project: scenario
  docker: $dbin/docker
  health_timeout: 20s
  keep_releases: 2
EOF

# agent N ARGS…: runs the agent binary with the environment a unit gives it (PATH,
# HOME) plus DOCKER_HOST, its log in agent-N.log; prints the exit code.
agent() {
	local n=$1 rc=0
	shift
	env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work" DOCKER_HOST="$docker_host" \
		"$bin/monky-deployd" "$@" >"$work/agent-$n.log" 2>&1 || rc=$?
	printf '%s' "$rc"
}

# bundle DIR SERIAL GREETING: writes a bundle (a web service with a healthcheck, a
# bind-mounted config/app.toml, LOG_LEVEL from vars and DB_PASSWORD from OpenBao
# secret db, key password) into DIR and tars it to DIR.tar; prints its sha, computed
# with coreutils as docs/BUNDLE.md gives the formula.
bundle() {
	local dir=$1 serial=$2 greeting=$3
	mkdir -p "$dir/config"
	cat >"$dir/manifest.json" <<EOF
{"schema": 1, "env_id": "$env_id", "serial": $serial,
 "compose_files": ["compose.yaml"], "files": ["compose.yaml", "config/app.toml"],
 "vars": {"LOG_LEVEL": "info"},
 "secrets": {"DB_PASSWORD": {"path": "db", "key": "password"}}}
EOF
	cat >"$dir/compose.yaml" <<'EOF'
services:
  web:
    image: nginx:1.27
    environment:
      LOG_LEVEL: ${LOG_LEVEL}
      DB_PASSWORD: ${DB_PASSWORD}
    volumes:
      - ./config/app.toml:/etc/app.toml:ro
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
EOF
	printf 'greeting = "%s"\n' "$greeting" >"$dir/config/app.toml"
	tar -C "$dir" --no-recursion --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
		-cf "$dir.tar" manifest.json compose.yaml config config/app.toml
	(cd "$dir" && find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# publish FILE EXPECTED-SHA: publishes a bundle; fails unless tenancy's sha is ours.
publish() {
	local answer sha
	answer=$(curl -sSf -X POST --data-binary @"$1" "$admin/envs/$env_id/bundles")
	sha=$(field sha "$answer")
	[ "$sha" = "$2" ] || fail "tenancy's sha $sha is not coreutils' $2"
	printf '%s' "$(field serial "$answer")"
}

# current_is SHA fails unless deploy_dir/current is release SHA.
current_is() {
	[ "$(readlink -f "$work/srv/current")" = "$(readlink -f "$work/srv/releases/$1")" ] ||
		fail "current is $(readlink "$work/srv/current"), not release $1"
}
reports() { curl -sSf "$admin/envs/$env_id/reports"; }
leases() { curl -sSf "$admin/envs/$env_id/leases"; }
engine_reads() { grep -c '"argv":\["engine","GET","/containers/json"\]' "$work/docker.log" || true; }
compose_calls() { grep -c "\"argv\":\[\"compose\",[^]]*\"$1\"" "$work/docker.log" || true; }

# --- 1. apply -------------------------------------------------------------------------
say "1. apply a bundle with a secret (the agent bootstraps from its grant)"
sha1=$(bundle "$work/b1" 1 hello)
serial=$(publish "$work/b1.tar" "$sha1")
[ "$serial" = 1 ] || fail "serial $serial, want 1"
curl -sSf -X PUT -d "{\"password\":\"$canary\"}" "$admin/envs/$env_id/secrets/db" >/dev/null
grant=$(field grant "$(curl -sSf -X POST "$admin/envs/$env_id/grants")")
(umask 077 && printf '%s\n' "$grant" >"$work/bootstrap.jwt")
rc=$(agent 1 run --config "$cfg")
[ "$rc" = 0 ] || fail "apply: monky-deployd run exited $rc"
r1=$(curl -sSf "$admin/envs/$env_id/reports/1?timeout=30s")
[ "$(field result "$r1")" = applied ] || fail "report 1: $r1"
[ "$(field sha "$r1")" = "$sha1" ] || fail "report 1 is not of $sha1: $r1"
current_is "$sha1"
grep -qF "$canary" "$work/srv/current/.env" || fail "the secret is not in the release's .env"
[ ! -e "$work/bootstrap.jwt" ] || fail "the grant was not consumed"
[ "$(engine_reads)" -gt 0 ] || fail "the agent never read the fake engine (DOCKER_HOST)"
[ "$(compose_calls ps)" = 0 ] || fail "the agent read through docker compose ps, not the Engine API"
containers=$(curl -sSf --unix-socket "$socket" 'http://docker/containers/json?all=1')
[ "$(count '"/scenario-web-1"' "$containers")" = 1 ] || fail "the engine does not show scenario-web-1: $containers"
ok "applied $sha1 (serial 1): report applied, the secret in .env only, the health read through the Engine API"

# --- 2. idle --------------------------------------------------------------------------
say "2. an idle tick"
curl -sSf -X PUT -d '{"action":"none"}' "$admin/envs/$env_id/desired"
ups=$(compose_calls up) reads=$(engine_reads)
rc=$(agent 2 run --config "$cfg")
[ "$rc" = 0 ] || fail "idle: monky-deployd run exited $rc"
[ "$(count '"result"' "$(reports)")" = 1 ] || fail "the idle tick reported: $(reports)"
[ "$(count '"sha"' "$(leases)")" = 1 ] || fail "the idle tick took a lease: $(leases)"
[ "$(compose_calls up)" = "$ups" ] || fail "the idle tick ran docker compose up"
[ "$(engine_reads)" -gt "$reads" ] || fail "the idle tick did not read the live health from the engine"
live=$(curl -sSf "$admin/envs/$env_id/checkins" | grep -o '"live":{"observed_at":"[^"]*","healthy":[a-z]*' | tail -1)
[ "$(field healthy "$live")" = true ] || fail "the idle check-in's live health is not healthy: $live"
ok "checked in, live healthy; no lease, no report, no compose up"

# --- 3. an unhealthy release ----------------------------------------------------------
say "3. an unhealthy release fails and the box goes back to the first one"
sha2=$(bundle "$work/b2" 2 "hello again")
serial=$(publish "$work/b2.tar" "$sha2")
[ "$serial" = 2 ] || fail "serial $serial, want 2"
# The script is read on every call: release sha2's web turns unhealthy; the restored
# release keeps the default (healthy), as on an engine.
cat >"$work/script.json" <<EOF
{"releases": {"$sha2": {"web": {"states": [{"health": "starting"},
  {"health": "unhealthy", "health_output": "GET /health: 500"}]}}}}
EOF
rc=$(agent 3 run --config "$cfg")
[ "$rc" = 1 ] || fail "the unhealthy release: monky-deployd run exited $rc, want 1"
r2=$(curl -sSf "$admin/envs/$env_id/reports/2?timeout=30s")
[ "$(field result "$r2")" = failed ] || fail "report 2: $r2"
[ "$(field code "$r2")" = UNHEALTHY ] || fail "report 2's code: $r2"
[ "$(field sha "$r2")" = "$sha2" ] || fail "report 2 is not of $sha2: $r2"
current_is "$sha1"
# status: the last run failed for the bundle, so a person must act (critical, exit 2),
# and it serves sha1.
rc=$(agent 4 status --config "$cfg" --json)
[ "$rc" = 2 ] || fail "monky-deployd status exited $rc, want 2 (critical) after a failed apply"
status=$(cat "$work/agent-4.log")
[ "$(field verdict "$status")" = critical ] || fail "status's verdict after a failed apply: $status"
[ "$(field healthy "$status")" = false ] || fail "status says healthy after a failed apply: $status"
live_re="\"live\":[[:space:]]*\\{[[:space:]]*\"sha\":[[:space:]]*\"$sha1\""
[[ $status =~ $live_re ]] || fail "status does not show $sha1 live: $status"
[ "$(count '"sha"' "$(leases)")" = 2 ] || fail "leases: $(leases)"
ok "report failed UNHEALTHY for $sha2; current and status back on $sha1"

# --- 4. down --------------------------------------------------------------------------
say "4. down with purge"
curl -sSf -X PUT -d '{"action":"down","purge":true}' "$admin/envs/$env_id/desired"
rc=$(agent 5 run --config "$cfg")
[ "$rc" = 0 ] || fail "down: monky-deployd run exited $rc"
r3=$(curl -sSf "$admin/envs/$env_id/reports/3?timeout=30s")
[ "$(field result "$r3")" = down ] || fail "report 3: $r3"
[ ! -e "$work/srv/current" ] || fail "current is still there"
state=$(cat "$work/docker.state")
[ "$(field up "$state")" = false ] || fail "the fake docker's project is still up: $state"
[ "$(field down_volumes "$state")" = true ] || fail "down did not remove volumes on a dev box: $state"
[ "$(curl -sSf --unix-socket "$socket" 'http://docker/containers/json?all=1')" = "[]" ] || fail "the engine still shows containers"
[ -z "$(ls -A "$work/srv/releases")" ] || fail "the purge left under releases/: $(ls -A "$work/srv/releases")"
ok "report down; current removed; compose down -v; every release removed with its .env"

# --- the canary and the end -----------------------------------------------------------
say "the secret is nowhere (the purge removed the releases' .env)"
leaks=$(grep -rlF "$canary" "$work" || true)
[ -z "$leaks" ] || fail "the secret is still in: $leaks"
ok "no .env, log, state, record, report or check-in holds it"

say "stop the fakes: close their stdin"
exec {fakes_in}>&- {engine_in}>&-
rc=0
wait "$fakes_pid" || rc=$?
[ "$rc" = 0 ] || fail "monky-fakes exited $rc"
wait "$engine_pid" || rc=$?
[ "$rc" = 0 ] || fail "fake-docker serve-engine exited $rc"
[ ! -e "$socket" ] || fail "the engine's socket $socket is still there"
unset fakes_in engine_in
fakes_pid="" engine_pid=""
ok "both exited 0; the socket is gone"
printf '\nscenario passed\n'
