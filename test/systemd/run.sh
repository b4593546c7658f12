#!/usr/bin/env bash
# run.sh — the packages on a real systemd: CI boots the .deb under systemd and drives
# the real engine (docs/OPERATIONS.md, "The packages under systemd").
#
#   bash test/systemd/run.sh
#
# Boots a Debian 12 container with systemd as PID 1 (the "box", from a cached
# debootstrap rootfs: rootfs.sh) on the docker engine of this machine, with the
# engine's socket mounted and the host's network, and runs the scenarios below under
# that systemd: the .deb (one binary, /usr/bin/monky-deployd) installed with apt,
# install.sh and the ansible role for real, the timer firing ticks of monky-deployd that
# apply a bundle on the real engine, an idle tick, exit codes 75 and 78 as the unit sees
# them, the loop service of sdk boxes (install.sh --transport sdk enables it instead of
# the timer; it runs ticks in one process, survives a 75, is restarted after a failed
# start and a crash but not after 78, stops a tick in flight on SIGTERM), the sandbox,
# the journal, remove and purge, the exposure measured online, and a box without docker
# compose v2. The agent talks to monky-fakes on loopback (transport: system; the box has
# no OpenZiti mesh, so the loop service's ticks run on system too). Prints a
# scenario table and exits non-zero when a scenario failed. With CI=true a scenario
# that cannot run is a failure; elsewhere the script may skip, naming the command that
# enables it.
#
# Needs: root, a running docker engine (cgroup v1 or v2) and the docker compose v2
# plugin on this machine (`bash tools/compose/build.sh --install`), Go, and the Debian
# mirror apt uses (once, for the rootfs). Everything it creates on the engine is named
# monky-systemd-box and removed at the end, except the box image, which is kept
# (tagged by its rootfs key) for the next run; MONKY_BOX_KEEP_IMAGE=0 removes it too.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
PATH=$PATH:/usr/local/go/bin
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

NAME=monky-systemd-box               # the box container; prefix of every image, project, network
BOX=$NAME
PROJECT=$NAME                        # compose project of the test bundle (never the default "monky")
ENV_ID=env-box-01
KIT_DIR=/srv/monky-box-kit           # install.sh's custom deploy dir
ROLE_DIR=/srv/monky-box-role         # the role's custom deploy dir
PLUGIN_IN_BOX=/usr/local/lib/docker/cli-plugins/docker-compose
UNIT=monky-deployd.service
TIMER=monky-deployd.timer
LOOP=monky-deployd-loop.service
MAX_EXPOSURE=2.0

start_all=$SECONDS
ci=${CI:-}
[ "$ci" = true ] || [ "$ci" = 1 ] && ci=true || ci=""

say() { printf '%s\n' "$*"; }
# cannot MESSAGE ENABLER: a scenario cannot run on this machine. In CI that is a
# failure; elsewhere the script stops with a message naming what enables it.
cannot() {
	if [ -n "$ci" ]; then
		printf 'test/systemd: FAIL: %s (CI=true: the systemd box must run)\n' "$1" >&2
		exit 1
	fi
	printf 'test/systemd: SKIP: %s; enable it with: %s\n' "$1" "$2" >&2
	exit 0
}

# --- preconditions --------------------------------------------------------------------
[ "$(id -u)" = 0 ] || cannot "not root" "sudo bash test/systemd/run.sh"
command -v docker >/dev/null 2>&1 || cannot "no docker CLI" "apt-get install docker.io"
docker info >/dev/null 2>&1 || cannot "no docker engine answers on the default socket" "dockerd &"
docker compose version >/dev/null 2>&1 || cannot "no docker compose v2 plugin on this machine" "bash tools/compose/build.sh --install"
command -v go >/dev/null 2>&1 || cannot "no Go toolchain" "install Go 1.26"
for t in curl jq; do
	if ! command -v "$t" >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$t" >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$t" >/dev/null; } ||
			cannot "no $t and apt cannot install it" "apt-get install $t"
	fi
done
sock=$(docker context inspect --format '{{.Endpoints.docker.Host}}' 2>/dev/null || echo unix:///var/run/docker.sock)
sock=${sock#unix://}
[ -S "$sock" ] || cannot "the engine's socket $sock is not a unix socket here" "DOCKER_HOST=unix:///var/run/docker.sock"
host_plugin=""
for d in /usr/local/lib/docker/cli-plugins /usr/local/libexec/docker/cli-plugins /usr/lib/docker/cli-plugins /usr/libexec/docker/cli-plugins "${HOME:-/root}/.docker/cli-plugins"; do
	if [ -x "$d/docker-compose" ]; then host_plugin=$(readlink -f "$d/docker-compose"); break; fi
done
[ -n "$host_plugin" ] || cannot "the compose plugin is not in a system plugin directory" "bash tools/compose/build.sh --install"

work=$(mktemp -d /tmp/monky-systemd-box.XXXXXX)
fakes_pid=""
cleanup() {
	local rc=$?
	set +e
	if [ -n "$fakes_pid" ]; then
		kill "$fakes_pid" 2>/dev/null
		wait "$fakes_pid" 2>/dev/null
	fi
	remove_engine_objects
	if [ "${MONKY_BOX_KEEP_IMAGE:-1}" = 0 ] && [ -n "${box_image:-}" ]; then
		docker image rm -f "$box_image" >/dev/null 2>&1
	fi
	rm -rf "$work"
	exit "$rc"
}
# remove_engine_objects: the box, the test bundle's containers and network, the app
# image; only what carries this test's names.
remove_engine_objects() {
	docker rm -f "$BOX" >/dev/null 2>&1 || true
	local ids
	ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
	# shellcheck disable=SC2086 # a list of container ids
	[ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
	docker network rm "${PROJECT}_default" >/dev/null 2>&1 || true
	ids=$(docker images -q --filter "reference=$NAME-app")
	# shellcheck disable=SC2086 # a list of image ids
	[ -z "$ids" ] || docker image rm -f $ids >/dev/null 2>&1 || true
}
trap cleanup EXIT
remove_engine_objects # leftovers of an interrupted run

# --- scenario bookkeeping ---------------------------------------------------------------
names=() results=() times=()
broken="" # set when a scenario that the later ones need failed
scenario() { # NAME FUNCTION [needed]
	local name=$1 fn=$2 t0=$SECONDS rc=0
	printf '\n=== %s\n' "$name"
	if [ -n "$broken" ]; then
		names+=("$name") results+=("FAIL (not run: $broken)") times+=(0)
		return 0
	fi
	set +e
	(
		set -euo pipefail
		"$fn"
	)
	rc=$?
	set -e
	names+=("$name") times+=($((SECONDS - t0)))
	if [ "$rc" = 0 ]; then
		results+=(PASS)
	else
		results+=(FAIL)
		if [ "${3:-}" = needed ]; then broken=$name; fi
	fi
}
fail() {
	printf 'FAIL: %s\n' "$*" >&2
	exit 1
}
ok() { printf 'ok   %s\n' "$*"; }

# box CMD...: run a command in the box. bsh SCRIPT: a bash script in the box.
box() { docker exec -i "$BOX" "$@"; }
bsh() { docker exec -i "$BOX" bash -euo pipefail -c "$1"; }
# wait_for SECONDS WHAT COMMAND...: poll until COMMAND succeeds.
wait_for() {
	local limit=$1 what=$2 end=$((SECONDS + $1))
	shift 2
	until "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			fail "timed out after ${limit}s waiting for $what"
		fi
		sleep 0.5
	done
}
# unit_prop UNIT PROPERTY: a property of a unit in the box.
unit_prop() { box systemctl show -P "$2" "$1"; }
# admin METHOD PATH [curl args]: the fakes' admin API.
admin() {
	local m=$1 p=$2
	shift 2
	curl -sS --fail-with-body -X "$m" "$admin_url$p" "$@"
}
reports() { admin GET "/envs/$ENV_ID/reports" | jq length; }
checkins() { admin GET "/envs/$ENV_ID/checkins" | jq length; }
# service_done: the service is inactive or failed again after a run started.
service_done() {
	local s
	s=$(unit_prop "$UNIT" ActiveState)
	[ "$s" = inactive ] || [ "$s" = failed ]
}
# journal_since [UNIT]: the unit's journal (JSON lines; default $UNIT) since the mark.
journal_mark() { box journalctl -n 1 -o cat --show-cursor -q | sed -n 's/^-- cursor: //p' >"$work/cursor"; }
journal_since() {
	local c
	c=$(cat "$work/cursor")
	if [ -n "$c" ]; then
		box journalctl -u "${1:-$UNIT}" -o json --after-cursor="$c"
	else
		box journalctl -u "${1:-$UNIT}" -o json
	fi
}
# prio_of PATTERN [UNIT]: the syslog priorities of the unit's journal lines (since the
# mark) whose message matches PATTERN.
# journald writes a MESSAGE with control characters as an array of bytes: jq_msg is
# every MESSAGE as a string.
jq_msg='def msg: .MESSAGE | if type == "array" then implode elif type == "string" then . else "" end;'
prio_of() { journal_since "${2:-}" | jq -r --arg p "$1" "$jq_msg"' select(msg | test($p)) | .PRIORITY' | sort -u | tr '\n' ' '; }
# loop_logged PATTERN: a line of the loop service since the mark matches PATTERN.
# (jq 1.6's -e answers for the last input only: -s makes the lines one input.)
loop_logged() { journal_since "$LOOP" | jq -s -e --arg p "$1" "$jq_msg"' any(.[]; msg | test($p))' >/dev/null; }
# loop_wait SECONDS WHAT PATTERN: wait for a line of the loop service (since the mark)
# that matches PATTERN; on a time-out, show its lines since the mark.
loop_wait() {
	if ! (wait_for "$1" "$2" loop_logged "$3"); then
		journal_since "$LOOP" | jq -r "$jq_msg"' "     journal: \(.PRIORITY) \(msg)"' | tail -n 20 >&2
		fail "no line of $LOOP matching '$3' within $1s"
	fi
}
# more_checkins N: tenancy saw more than N check-ins of the env.
more_checkins() { [ "$(checkins)" -gt "$1" ]; }
# loop_is STATE: the loop service's ActiveState is STATE.
loop_is() { [ "$(unit_prop "$LOOP" ActiveState)" = "$1" ]; }
# loop_restarted N PID: systemd restarted the loop since its NRestarts was N: the counter
# grew and a main process other than PID started. ExecMainPID, not MainPID, and not
# "active": the restarted loop may meet a 78 within a second of its start (its first
# tick comes within a tenth of --interval), before a poll would see it running.
loop_restarted() {
	local p
	p=$(unit_prop "$LOOP" ExecMainPID)
	[ "$(unit_prop "$LOOP" NRestarts)" -gt "$1" ] && [ "$p" != "$2" ] && [ "$p" != 0 ]
}

# ---------------------------------------------------------------------------------------
# prepare: the .deb, monky-fakes, the app image, the bundle, the box image.

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' deployd/version.go)
[ -n "$version" ] || cannot "no 'const Version = \"…\"' in deployd/version.go" "git pull (deployd.Version is set there)"
deb=$work/out/monky-deployd_${version}_$(dpkg --print-architecture).deb
secret="sysbox-secret-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
app_image=""
box_image=""

prepare_builds() {
	# The .deb as CI builds it: the one binary, /usr/bin/monky-deployd.
	bash packaging/build-deb.sh "$version" "$work/out" ./cmd/monky-deployd
	[ -f "$deb" ] || fail "no $deb"
	go build -o "$work/monky-fakes" ./cmd/monky-fakes
	mkdir -p "$work/app"
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/app/app" ./test/systemd/app
	local key
	key=$(sha256sum "$work/app/app" | cut -c1-12)
	echo "$NAME-app:$key" >"$work/app_image"
	tar -C "$work/app" -cf - app | docker import -c 'ENTRYPOINT ["/app"]' -c 'CMD ["serve"]' -m "$NAME test app" - "$NAME-app:$key" >/dev/null
	ok "built the .deb, monky-fakes and the image $NAME-app:$key"

	# The box's docker CLI: the host's, in a package that provides docker.io, so that
	# apt satisfies the .deb's Depends without the engine in the box.
	local cli pkg v
	cli=$(command -v docker)
	pkg=$work/docker-cli
	v=$(docker version --format '{{.Client.Version}}' | tr -c 'A-Za-z0-9.+~\n' '~')
	install -d "$pkg/DEBIAN" "$pkg/usr/bin"
	install -m 0755 "$cli" "$pkg/usr/bin/docker"
	cat >"$pkg/DEBIAN/control" <<CONTROL
Package: $NAME-docker-cli
Version: $v
Architecture: $(dpkg --print-architecture)
Maintainer: Monky platform team <platform@monky.internal>
Provides: docker.io
Conflicts: docker.io, docker-ce-cli
Section: admin
Priority: optional
Description: the host's docker CLI for the monky-deployd systemd box (test only)
 Satisfies monky-deployd's Depends in the box, which drives the host's engine.
CONTROL
	dpkg-deb --build --root-owner-group -Znone "$pkg" "$work/docker-cli.deb" >/dev/null
	ok "the box's docker CLI package (Provides: docker.io) from $cli, $v"
}

prepare_bundle() {
	# monky-fakes on loopback; the box shares the host's network.
	coproc FAKES { exec "$work/monky-fakes" 2>"$work/fakes.log"; }
	# shellcheck disable=SC2153 # set by coproc
	fakes_pid=$FAKES_PID
	local line
	read -r -t 30 line <&"${FAKES[0]}" || fail "monky-fakes printed no address line"
	echo "$line" >"$work/fakes.json"
	ok "monky-fakes: $line"
}

prepare_box_image() {
	local tarball key
	tarball=$(bash "$here/rootfs.sh")
	key=$(basename "$tarball" .tar)
	key=${key##*-}
	box_image=$NAME:$key
	echo "$box_image" >"$work/box_image"
	if docker image inspect "$box_image" >/dev/null 2>&1; then
		ok "box image $box_image (kept from an earlier run)"
	else
		docker import -c 'CMD ["/sbin/init"]' -c 'ENV container=docker' -m "$NAME: Debian 12 with systemd" "$tarball" "$box_image" >/dev/null
		ok "imported $tarball as $box_image"
	fi
	# Older keys of the box image are stale: remove them.
	docker images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$NAME" | while read -r img; do
		[ "$img" = "$box_image" ] || docker image rm -f "$img" >/dev/null 2>&1 || true
	done
}

# --- scenario: the box boots -------------------------------------------------------------
sc_boot() {
	local cgroup_opts=(-v /sys/fs/cgroup:/sys/fs/cgroup:rw)
	if [ "$(docker info --format '{{.CgroupVersion}}')" = 2 ]; then
		cgroup_opts+=(--cgroupns=private)
	fi
	docker run -d --name "$BOX" --hostname "$NAME" --label "$NAME=1" \
		--network host \
		--cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH \
		--cap-add IPC_LOCK --cap-add SYS_NICE --cap-add LINUX_IMMUTABLE \
		--security-opt seccomp=unconfined --security-opt apparmor=unconfined \
		--tmpfs /run --tmpfs /run/lock \
		"${cgroup_opts[@]}" \
		-v "$sock:/run/docker.sock" \
		--stop-signal SIGRTMIN+3 \
		"$box_image" /sbin/init >/dev/null
	# Right after the start systemctl cannot reach the manager yet: poll, then --wait.
	local state="" end=$((SECONDS + 90))
	while [ "$SECONDS" -lt "$end" ]; do
		state=$(timeout 60 docker exec "$BOX" systemctl is-system-running --wait 2>/dev/null || true)
		case $state in running | degraded) break ;; esac
		[ "$(docker inspect -f '{{.State.Running}}' "$BOX")" = true ] || break
		sleep 0.5
	done
	case $state in
	running | degraded) ok "systemd in the box: $state" ;;
	*)
		docker logs "$BOX" 2>&1 | tail -n 30
		fail "systemd in the box did not come up (state: ${state:-none})"
		;;
	esac
	if [ "$state" = degraded ]; then
		box systemctl --failed --no-legend --plain | sed 's/^/     failed unit: /'
	fi
	[ "$(box cat /proc/1/comm)" = systemd ] || fail "PID 1 in the box is not systemd"
	# The host's docker CLI (as a package providing docker.io), the kit and the role.
	box mkdir -p /opt/monky
	docker cp "$work/docker-cli.deb" "$BOX:/opt/monky/docker-cli.deb"
	docker cp "$deb" "$BOX:/opt/monky/monky-deployd.deb"
	docker cp packaging "$BOX:/opt/monky/packaging"
	box dpkg -i /opt/monky/docker-cli.deb >/dev/null
	box docker version --format 'the box reaches the engine: {{.Server.Version}}'
	# The scenarios wait for the timer: it also fires one second after each start
	# (OnActiveSec=, re-armed by every start, unlike OnBootSec=, which fires once per
	# boot), with a random delay of up to 2s instead of 30s. Only the timer's schedule
	# differs from the package.
	bsh "mkdir -p /etc/systemd/system/$TIMER.d && printf '[Timer]\nOnActiveSec=1s\nRandomizedDelaySec=2s\n' >/etc/systemd/system/$TIMER.d/zz-box.conf"
	ok "box ready: docker CLI package, .deb, packaging/ copied; timer drop-in zz-box.conf (OnActiveSec=1s, RandomizedDelaySec=2s)"
}

# --- scenario: apt resolves the .deb on stock Debian 12 ---------------------------------
sc_stock_debian() {
	# This machine is Debian 12 with Debian's docker.io and no compose v2 package:
	# apt must accept the .deb (compose v2 is a Recommends).
	local out
	out=$(apt-get install -s "$deb" 2>&1) || {
		echo "$out"
		fail "apt-get install -s refuses the .deb on this Debian"
	}
	echo "$out" | grep -E '^(Inst|Conf) monky-deployd' || fail "apt would not install monky-deployd: $out"
	dpkg-deb -f "$deb" Depends Recommends
	ok "apt resolves the .deb here ($(. /etc/os-release && echo "$PRETTY_NAME"), docker.io $(dpkg-query -W -f '${Version}' docker.io 2>/dev/null || echo 'not installed'))"
}

# --- scenario: the .deb alone ------------------------------------------------------------
sc_deb() {
	box apt-get install -y /opt/monky/monky-deployd.deb >"$work/apt.out" 2>&1 || {
		cat "$work/apt.out"
		fail "apt-get install ./monky-deployd.deb"
	}
	grep -q 'docker compose v2 is not installed' "$work/apt.out" || fail "postinst did not note the missing compose v2"
	ok "apt installed the .deb (Depends satisfied by the box's docker CLI package); postinst noted the missing compose v2"
	[ "$(box systemctl is-enabled $TIMER)" = enabled ] || fail "timer not enabled"
	[ "$(box systemctl is-active $TIMER || true)" = inactive ] || fail "timer started without a config"
	ok "timer enabled, not started (no config)"
	local got
	got=$(bsh 'stat -c "%n %a" /etc/monky-deployd /var/lib/monky-deployd /var/lib/monky-deployd/docker /srv/monky' | tr '\n' ' ')
	[ "$got" = "/etc/monky-deployd 750 /var/lib/monky-deployd 700 /var/lib/monky-deployd/docker 700 /srv/monky 755 " ] || fail "modes: $got"
	ok "directories: $got"
	got=$(box dpkg -L monky-deployd | grep -E '^/usr/(s?bin|lib/monky|libexec)/.' | tr '\n' ' ')
	[ "$got" = "/usr/bin/monky-deployd " ] || fail "the package's programs: $got"
	got=$(box stat -c '%n %F %a %U:%G' /usr/bin/monky-deployd)
	[ "$got" = "/usr/bin/monky-deployd regular file 755 root:root" ] || fail "binary: $got"
	ok "one binary in the package: $got ($(box monky-deployd version))"
	grep -q 'path=/usr/bin/monky-deployd ; argv\[\]=/usr/bin/monky-deployd run --config /etc/monky-deployd/config.yaml --metrics-file ' <<<"$(unit_prop $UNIT ExecStart)" ||
		fail "the service does not run /usr/bin/monky-deployd run: $(unit_prop $UNIT ExecStart)"
	grep -q 'path=/usr/bin/monky-deployd ; argv\[\]=/usr/bin/monky-deployd run --loop --config /etc/monky-deployd/config.yaml --metrics-file ' <<<"$(unit_prop $LOOP ExecStart)" ||
		fail "the loop service does not run /usr/bin/monky-deployd run --loop: $(unit_prop $LOOP ExecStart)"
	[ "$(box systemctl is-enabled $LOOP || true)" = disabled ] || fail "postinst enabled the loop service"
	loop_is inactive || fail "the loop service runs without a config"
	ok "$UNIT runs 'monky-deployd run', $LOOP 'monky-deployd run --loop'; the loop service is disabled and inactive (install.sh or the role chooses it)"
	box systemctl start $UNIT
	[ "$(unit_prop $UNIT ConditionResult)" = no ] || fail "the service ran without a config"
	[ "$(box systemctl is-failed $UNIT || true)" != failed ] || fail "an unconfigured start failed the unit"
	ok "a start without a config is skipped by ConditionPathExists=, not failed"
	box apt-get purge -y monky-deployd >/dev/null 2>&1
	bsh '! test -e /etc/monky-deployd && ! test -e /var/lib/monky-deployd' || fail "purge left files"
	ok "purge of an unconfigured box leaves nothing"
}

# --- scenario: install.sh for real --------------------------------------------------------
kit_args() {
	echo --deb /opt/monky/monky-deployd.deb --env-id "$ENV_ID" --transport system \
		--tenancy-url "$tenancy_url" --bao-addr "$bao_addr" --deploy-dir "$KIT_DIR" \
		--compose-project "$PROJECT" --min-free-mb 1 --health-timeout 60s --grant /opt/monky/grant.jwt
}
sc_install_kit() {
	admin POST "/envs/$ENV_ID/grants" | jq -r .grant | tr -d '\n' >"$work/grant1"
	docker cp "$work/grant1" "$BOX:/opt/monky/grant.jwt"
	# shellcheck disable=SC2046 # kit_args prints words without spaces
	box bash /opt/monky/packaging/install.sh $(kit_args) >"$work/kit1.out" 2>&1 || {
		cat "$work/kit1.out"
		fail "install.sh, first run"
	}
	cat "$work/kit1.out"
	grep -q 'Setting up monky-deployd' "$work/kit1.out" || fail "install.sh did not install the package with apt"
	# shellcheck disable=SC2016 # a dpkg-query format
	[ "$(box dpkg-query -W -f '${db:Status-Status}' monky-deployd)" = installed ] || fail "package not installed"
	{ [ "$(box systemctl is-enabled $TIMER)" = enabled ] && [ "$(box systemctl is-active $TIMER)" = active ]; } ||
		fail "install.sh did not enable and start the timer"
	{ [ "$(box systemctl is-enabled $LOOP || true)" = disabled ] && loop_is inactive; } || fail "install.sh --transport system enabled the loop service"
	grep -qx "install.sh: units: transport system: $TIMER enabled, active; $LOOP disabled, inactive" "$work/kit1.out" || fail "install.sh did not say which unit it chose"
	local u
	for u in $UNIT $LOOP; do
		bsh "grep -qx 'ReadWritePaths=$KIT_DIR' /etc/systemd/system/$u.d/deploy-dir.conf" || fail "no deploy-dir drop-in for $u"
		grep -q "$KIT_DIR" <<<"$(unit_prop "$u" ReadWritePaths)" ||
			fail "systemd did not load the drop-in of $u: ReadWritePaths=$(unit_prop "$u" ReadWritePaths)"
	done
	[ "$(box stat -c %a /etc/monky-deployd/config.yaml /etc/monky-deployd/bootstrap.jwt | tr '\n' ' ')" = "640 600 " ] ||
		fail "config or grant mode"
	ok "install.sh: apt-get install of the .deb, config 0640, grant 0600, drop-ins for $KIT_DIR loaded, transport system: timer enabled and active, loop service disabled"
	grep -qF "$(cat "$work/grant1")" "$work/kit1.out" && fail "install.sh printed the grant"
	# shellcheck disable=SC2046
	box bash /opt/monky/packaging/install.sh $(kit_args) >"$work/kit2.out" 2>&1 || {
		cat "$work/kit2.out"
		fail "install.sh, second run"
	}
	cat "$work/kit2.out"
	grep -q 'done: nothing changed' "$work/kit2.out" || fail "the second run changed something"
	ok "install.sh again: nothing changed"
}

# --- scenario: no compose v2 in the box ----------------------------------------------------
sc_no_compose() {
	# The timer started by install.sh fires at once; the box has no compose plugin.
	wait_for 60 "the timer's first tick" bash -c "[ \"\$(docker exec $BOX systemctl show -P ExecMainStatus $UNIT)\" = 1 ]"
	[ "$(box systemctl is-failed $UNIT || true)" = failed ] || fail "the unit did not fail"
	box journalctl -u $UNIT -o json | jq -r 'select(.MESSAGE | test("COMPOSE_MISSING")) | "\(.PRIORITY) \(.MESSAGE)"' >"$work/nocompose"
	cat "$work/nocompose"
	grep -q '^3 .*docker compose v2 is not installed.*docker-compose-plugin' "$work/nocompose" || fail "no COMPOSE_MISSING error (priority 3) in the journal"
	[ "$(checkins)" = 0 ] || fail "the agent checked in without compose v2"
	[ "$(box systemctl is-active $TIMER)" = active ] || fail "the timer stopped"
	bsh '! test -e /var/lib/monky-deployd/bao.token && test -e /etc/monky-deployd/bootstrap.jwt' || fail "the grant was used without compose v2"
	ok "no compose v2: the tick exits 1 with COMPOSE_MISSING (journal priority 3), no check-in, grant kept, timer active"
}

# --- scenario: the timer fires a tick that applies the bundle ------------------------------
sc_timer_apply() {
	box mkdir -p "$(dirname $PLUGIN_IN_BOX)"
	docker cp "$host_plugin" "$BOX:$PLUGIN_IN_BOX"
	box chmod 0755 $PLUGIN_IN_BOX
	box docker compose version
	box systemctl reset-failed $UNIT
	journal_mark
	local before
	before=$(unit_prop $TIMER LastTriggerUSecMonotonic)
	box systemctl restart $TIMER
	local r
	r=$(admin GET "/envs/$ENV_ID/reports/1?timeout=180s") || fail "no report within 180s: $(box journalctl -u $UNIT -n 30 --no-pager)"
	echo "$r" | jq -c '{result, code, detail, services}'
	[ "$(echo "$r" | jq -r .result)" = applied ] || fail "report: $r"
	wait_for 60 "the tick to end" service_done
	[ "$(unit_prop $TIMER LastTriggerUSecMonotonic)" != "$before" ] || fail "the timer did not trigger the run"
	[ "$(unit_prop $UNIT Result) $(unit_prop $UNIT ExecMainStatus)" = "success 0" ] || fail "the unit did not succeed"
	ok "the timer fired a tick: bootstrap, check-in, lease, secret, compose up on the engine, report applied, exit 0"
	local sha
	sha=$(echo "$r" | jq -r .sha)
	echo "$sha" >"$work/sha"
	# The sandbox let it write the state dir and the custom deploy dir.
	bsh "test \"\$(readlink $KIT_DIR/current)\" = releases/$sha || test \"\$(readlink $KIT_DIR/current)\" = $KIT_DIR/releases/$sha" ||
		fail "current is $(box readlink $KIT_DIR/current)"
	local modes
	modes=$(bsh "stat -c '%n %a' $KIT_DIR/releases/$sha/.env /var/lib/monky-deployd/bao.token /var/lib/monky-deployd/state.json" | tr '\n' ' ')
	[ "$modes" = "$KIT_DIR/releases/$sha/.env 600 /var/lib/monky-deployd/bao.token 600 /var/lib/monky-deployd/state.json 600 " ] || fail "modes: $modes"
	bsh '! test -e /etc/monky-deployd/bootstrap.jwt' || fail "the grant was not consumed"
	ok "sandbox: state dir, $KIT_DIR (drop-in), /etc/monky-deployd (grant consumed) written; $modes"
	# The containers run on the host's engine with the secret from OpenBao.
	local cid
	cid=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=app")
	[ -n "$cid" ] || fail "no running app container"
	[ "$(docker inspect -f '{{.State.Health.Status}}' "$cid")" = healthy ] || fail "app not healthy"
	grep -qxF "DB_PASSWORD=$secret" <<<"$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$cid")" || fail "the secret did not reach the container"
	ok "container $(docker inspect -f '{{.Name}}' "$cid") healthy on the engine, with the secret read from OpenBao"
	[ "$(prio_of 'msg="tick done"')" = "6 " ] || fail "tick done priority: $(prio_of 'msg="tick done"')"
	# Who wrote the tick's lines: the one binary, as the unit's ExecStart= says. (journald
	# reads _EXE from /proc when it stores a line: a line stored after the exit has none.)
	local exe ident
	exe=$(journal_since | jq -r 'select(._TRANSPORT == "stdout" and ._EXE != null) | ._EXE' | sort -u | tr '\n' ' ')
	ident=$(journal_since | jq -r 'select(._TRANSPORT == "stdout") | .SYSLOG_IDENTIFIER' | sort -u | tr '\n' ' ')
	[ "$exe $ident" = "/usr/bin/monky-deployd  monky-deployd " ] || fail "the tick's journal lines come from: $exe, identifiers: $ident"
	ok "the timer's unit ran /usr/bin/monky-deployd (the _EXE and identifier of the tick's lines)"
	box systemctl stop $TIMER
}

# --- scenario: an idle tick -----------------------------------------------------------------
sc_idle_tick() {
	# After the apply the box is steady: when tenancy answers none, a tick only checks
	# in: exit 0, no lease, no report.
	local desired
	desired=$(jq -nc --arg sha "$(cat "$work/sha")" '{action: "apply", sha: $sha}')
	admin PUT "/envs/$ENV_ID/desired" -d '{"action":"none"}' >/dev/null
	# shellcheck disable=SC2064 # $desired is expanded now, on purpose
	trap "admin PUT /envs/$ENV_ID/desired -d '$desired' >/dev/null" EXIT
	local n c l
	n=$(reports)
	c=$(checkins)
	l=$(admin GET "/envs/$ENV_ID/leases" | jq length)
	journal_mark
	box systemctl start $UNIT || fail "the idle tick failed: $(box journalctl -u $UNIT -n 20 --no-pager)"
	[ "$(unit_prop $UNIT Result) $(unit_prop $UNIT ExecMainStatus)" = "success 0" ] || fail "the idle tick did not exit 0"
	[ "$(prio_of 'msg="tick done"')" = "6 " ] || fail "no 'tick done' line: $(journal_since | jq -r .MESSAGE)"
	[ "$(checkins)" -gt "$c" ] || fail "the idle tick did not check in"
	[ "$(reports)" = "$n" ] || fail "an idle tick reported"
	[ "$(admin GET "/envs/$ENV_ID/leases" | jq length)" = "$l" ] || fail "an idle tick leased"
	ok "a steady box's idle tick (check-in answered none): exit 0, no lease, no report"
}

# --- scenario: a hold set and cleared by a member of group monky-hold -------------------------
sc_hold() {
	local gid_line
	gid_line=$(box getent group monky-hold) || fail "the package did not create group monky-hold"
	[ "$(box stat -c '%a %U:%G' /var/lib/monky-deployd-hold)" = "2770 root:monky-hold" ] ||
		fail "hold dir: $(box stat -c '%a %U:%G' /var/lib/monky-deployd-hold)"
	box bash -c 'id alice >/dev/null 2>&1 || useradd -m -G monky-hold alice; id bob >/dev/null 2>&1 || useradd -m bob'
	ok "group monky-hold ($gid_line), /var/lib/monky-deployd-hold 2770 root:monky-hold; alice is a member, bob is not"
	# bob may not hold the box.
	if box runuser -u bob -- monky-deployd hold --for 1h --reason nope >"$work/hold-bob.out" 2>&1; then
		fail "a user outside monky-hold set a hold"
	fi
	grep -q 'members of group monky-hold' "$work/hold-bob.out" || fail "bob's refusal: $(cat "$work/hold-bob.out")"
	# alice holds it: the config is root's (0640), her hold uses the default holds.dir.
	box runuser -u alice -- monky-deployd hold --for 2h --reason "demo at 3" >"$work/hold-alice.out" 2>&1 ||
		fail "alice could not hold the box: $(cat "$work/hold-alice.out")"
	grep -q '^held until ' "$work/hold-alice.out" || fail "hold said: $(cat "$work/hold-alice.out")"
	[ "$(box stat -c '%U' /var/lib/monky-deployd-hold/hold.json)" = alice ] || fail "the hold file is not alice's"
	ok "alice: $(cat "$work/hold-alice.out")"
	# A new release is published: the ticks under the hold prepare it, take no lease,
	# report nothing, exit 0, and the check-ins carry the deferral.
	jq '.serial = 2 | .vars.LOG_LEVEL = "debug"' "$work/bundle/manifest.json" >"$work/bundle2-manifest.json"
	mkdir -p "$work/bundle2"
	cp "$work/bundle/compose.yaml" "$work/bundle2/"
	cp "$work/bundle2-manifest.json" "$work/bundle2/manifest.json"
	tar -C "$work/bundle2" -cf "$work/bundle2.tar" manifest.json compose.yaml
	local sha2 n l
	sha2=$(admin POST "/envs/$ENV_ID/bundles" --data-binary "@$work/bundle2.tar" | jq -r .sha)
	n=$(reports)
	l=$(admin GET "/envs/$ENV_ID/leases" | jq length)
	local i
	for i in 1 2; do
		box systemctl start $UNIT || fail "deferred tick $i: $(box journalctl -u $UNIT -n 20 --no-pager)"
		[ "$(unit_prop $UNIT ExecMainStatus)" = 0 ] || fail "deferred tick $i exited $(unit_prop $UNIT ExecMainStatus)"
	done
	[ "$(reports)" = "$n" ] || fail "a deferred tick reported"
	[ "$(admin GET "/envs/$ENV_ID/leases" | jq length)" = "$l" ] || fail "a deferred tick leased"
	local d
	d=$(admin GET "/envs/$ENV_ID/deferred") || fail "the check-in carries no deferral"
	[ "$(echo "$d" | jq -r '"\(.why) \(.owner) \(.sha) \(.prepared)"')" = "hold alice $sha2 true" ] || fail "deferred: $d"
	local st
	st=$(box monky-deployd status || true)
	grep -q "DEFERRED: ${sha2:0:12}" <<<"${st%%$'\n'*}" || fail "status: ${st%%$'\n'*}"
	ok "under the hold: two ticks exit 0, no lease, no report; the check-in carries $(echo "$d" | jq -c '{why, owner, reason, prepared}'); status says DEFERRED on its first line"
	# alice clears it: the path unit starts a tick at once, which applies with one lease.
	box systemctl start monky-deployd-hold.path
	box runuser -u alice -- monky-deployd hold --clear >"$work/hold-clear.out" 2>&1 || fail "alice could not clear: $(cat "$work/hold-clear.out")"
	local r
	r=$(admin GET "/envs/$ENV_ID/reports/$((n + 1))?timeout=60s") || fail "no report within 60s of hold --clear"
	[ "$(echo "$r" | jq -r '"\(.result) \(.sha)"')" = "applied $sha2" ] || fail "report after the clear: $r"
	[ "$(admin GET "/envs/$ENV_ID/leases" | jq length)" = "$((l + 1))" ] || fail "the switch did not take one lease"
	box systemctl stop monky-deployd-hold.path
	echo "$sha2" >"$work/sha"
	ok "alice cleared the hold: monky-deployd-hold.path started a tick that applied $sha2 with one lease"
}

# --- scenario: exit 75 is success -------------------------------------------------------
sc_exit75() {
	admin PUT /faults -d '{"status":{"checkin":503}}' >/dev/null
	journal_mark
	box systemctl start $UNIT || fail "systemctl start failed on a temporary condition"
	[ "$(unit_prop $UNIT ExecMainStatus)" = 75 ] || fail "exit status $(unit_prop $UNIT ExecMainStatus), want 75"
	[ "$(unit_prop $UNIT Result)" = success ] || fail "Result=$(unit_prop $UNIT Result)"
	[ "$(box systemctl is-failed $UNIT || true)" != failed ] || fail "75 failed the unit"
	[ "$(prio_of 'msg="tick ended on a temporary condition')" = "4 " ] || fail "priority of the temporary line: $(prio_of 'msg="tick ended on a temporary condition')"
	admin PUT /faults -d '{}' >/dev/null
	ok "tenancy 503: exit 75, Result=success, unit not failed, a warning (priority 4) in the journal"
}

# --- scenario: exit 78 fails the unit, the timer keeps running ------------------------------
sc_exit78() {
	admin PUT /faults -d '{"status":{"checkin":409}}' >/dev/null
	journal_mark
	box systemctl start $TIMER # fires at once
	wait_for 60 "the timer's tick to exit 78" bash -c "[ \"\$(docker exec $BOX systemctl show -P ExecMainStatus $UNIT)\" = 78 ]"
	wait_for 30 "the tick to end" service_done
	[ "$(box systemctl is-failed $UNIT || true)" = failed ] || fail "78 did not fail the unit"
	[ "$(unit_prop $UNIT Result)" = exit-code ] || fail "Result=$(unit_prop $UNIT Result)"
	[ "$(box systemctl is-active $TIMER)" = active ] || fail "the timer stopped after 78"
	[ -n "$(unit_prop $TIMER NextElapseUSecMonotonic)" ] || fail "the timer has no next elapse"
	[ "$(prio_of 'msg="tick failed"')" = "3 " ] || fail "priority of the failure: $(prio_of 'msg="tick failed"')"
	ok "AGENT_ENV_MISMATCH: exit 78, unit failed (error, priority 3); the timer stays active with a next elapse"
	box systemctl stop $TIMER
	# The latch: the next run exits 78 without the network.
	admin PUT /faults -d '{}' >/dev/null
	local n
	n=$(admin GET /requests | jq length)
	box systemctl start $UNIT && fail "a latched run succeeded"
	[ "$(unit_prop $UNIT ExecMainStatus)" = 78 ] || fail "latched run: exit $(unit_prop $UNIT ExecMainStatus)"
	[ "$(admin GET /requests | jq length)" = "$n" ] || fail "a latched run touched the network"
	# A successful bootstrap with a fresh grant clears it.
	admin POST "/envs/$ENV_ID/grants" | jq -r .grant | tr -d '\n' >"$work/grant2"
	docker cp "$work/grant2" "$BOX:/etc/monky-deployd/bootstrap.jwt"
	box chmod 0600 /etc/monky-deployd/bootstrap.jwt
	box monky-deployd bootstrap >/dev/null 2>&1 || fail "bootstrap"
	box systemctl reset-failed $UNIT
	box systemctl start $UNIT || fail "the run after the bootstrap failed"
	[ "$(unit_prop $UNIT ExecMainStatus)" = 0 ] || fail "exit $(unit_prop $UNIT ExecMainStatus) after the bootstrap"
	ok "latched: the next run exits 78 without the network; a bootstrap clears it, then exit 0"
}

# --- scenarios: the loop service of sdk boxes ---------------------------------------------
# kit_args_for TRANSPORT: the kit's arguments with another transport and no grant (the
# box has its token; grant1 was consumed long ago), the config replaced.
kit_args_for() { kit_args | sed "s/--transport system/--transport $1/; s/ --grant [^ ]*//; s/\$/ --force-config/"; }

sc_loop_install() {
	# The box's config of the timer scenarios (transport system), for the next scenario.
	box cp /etc/monky-deployd/config.yaml /opt/monky/config.system.yaml
	journal_mark
	# shellcheck disable=SC2046 # kit_args_for prints words without spaces
	box bash /opt/monky/packaging/install.sh $(kit_args_for sdk) >"$work/kit-sdk.out" 2>&1 || {
		cat "$work/kit-sdk.out"
		fail "install.sh --transport sdk"
	}
	cat "$work/kit-sdk.out"
	bsh "grep -qx \"  transport: 'sdk'\" /etc/monky-deployd/config.yaml" || fail "the config's transport is not sdk"
	grep -q "^install.sh: units: transport sdk: $LOOP enabled, " "$work/kit-sdk.out" || fail "install.sh did not choose $LOOP"
	[ "$(box systemctl is-enabled $LOOP)" = enabled ] || fail "the loop service is not enabled"
	{ [ "$(box systemctl is-enabled $TIMER || true)" = disabled ] && [ "$(box systemctl is-active $TIMER || true)" = inactive ]; } ||
		fail "install.sh --transport sdk left the timer enabled or active"
	grep -q "$KIT_DIR" <<<"$(unit_prop $LOOP ReadWritePaths)" || fail "the loop service has no drop-in for $KIT_DIR: $(unit_prop $LOOP ReadWritePaths)"
	ok "install.sh --transport sdk: config transport sdk, $LOOP enabled and started, $TIMER disabled and inactive, the drop-in for $KIT_DIR loaded"
	# The box has no OpenZiti identity: the loop cannot start (exit 1, the error names
	# tenancy.identity), and systemd starts it again after RestartSec, for as long as it takes.
	wait_for 60 "systemd to restart the loop after its failed start, and that start to fail again" \
		bash -c "[ \"\$(docker exec $BOX systemctl show -P NRestarts $LOOP)\" -ge 1 ] && [ \"\$(docker exec $BOX systemctl show -P SubState $LOOP)\" = auto-restart ]"
	[ "$(unit_prop $LOOP ExecMainStatus)" = 1 ] || fail "the loop's failed start exited $(unit_prop $LOOP ExecMainStatus), want 1"
	[ "$(prio_of 'could not start the agent.*tenancy.identity' $LOOP)" = "3 " ] ||
		fail "no error naming tenancy.identity: $(journal_since $LOOP | jq -r .MESSAGE)"
	ok "no identity: the loop exits 1 (an error naming tenancy.identity), systemd restarts it after RestartSec ($(unit_prop $LOOP NRestarts) restart(s) so far)"
}

sc_loop_ticks() {
	# The box has no mesh: the loop runs on the system transport from here on. The
	# restart that is pending picks the config up by itself.
	local c pid restarts
	c=$(checkins)
	box install -m 0640 /opt/monky/config.system.yaml /etc/monky-deployd/config.yaml
	journal_mark
	wait_for 60 "the restarted loop's first tick" more_checkins "$c"
	loop_wait 30 "the first tick to end" 'msg="tick done"'
	loop_is active || fail "the loop is $(unit_prop $LOOP ActiveState) after its first tick"
	pid=$(unit_prop $LOOP MainPID)
	restarts=$(unit_prop $LOOP NRestarts)
	[ "$(prio_of 'msg="tick done"' $LOOP)" = "6 " ] || fail "priority of the loop's 'tick done'"
	ok "the config fixed, the pending restart starts the loop and it ticks (pid $pid, check-in answered)"
	# The next tick (a minute later: next_checkin_s of the fakes) ends on 75.
	admin PUT /faults -d '{"status":{"checkin":503}}' >/dev/null
	loop_wait 90 "the loop's second tick to end on 75" 'tick ended on a temporary condition'

	admin PUT /faults -d '{}' >/dev/null
	[ "$(prio_of 'msg="tick ended on a temporary condition' $LOOP)" = "4 " ] || fail "priority of the temporary line"
	sleep 2
	{ loop_is active && [ "$(unit_prop $LOOP MainPID)" = "$pid" ] && [ "$(unit_prop $LOOP NRestarts)" = "$restarts" ]; } ||
		fail "the loop did not survive a 75: $(unit_prop $LOOP ActiveState), pid $(unit_prop $LOOP MainPID), $(unit_prop $LOOP NRestarts) restarts"
	ok "tenancy 503: the tick ends on 75 (a warning), the loop keeps running (pid $pid, no restart)"
	# It backs off (--interval, a minute, after a first 75) and ticks again.
	c=$(checkins)
	journal_mark
	wait_for 90 "the loop's third tick" more_checkins "$c"
	loop_wait 30 "the third tick to end" 'msg="tick done"'

	[ "$(unit_prop $LOOP MainPID)" = "$pid" ] || fail "the third tick ran in another process"
	ok "after the back-off the same process ticks again: three ticks (0, 75, 0) in pid $pid"
}

sc_loop_crash_78() {
	local pid restarts
	pid=$(unit_prop $LOOP MainPID)
	restarts=$(unit_prop $LOOP NRestarts)
	loop_is active || fail "the loop does not run"
	# The next check-in answers AGENT_ENV_MISMATCH. A crash first: the restarted loop's
	# first tick (within 6s of its start) meets it.
	admin PUT /faults -d '{"status":{"checkin":409}}' >/dev/null
	journal_mark
	box systemctl kill --signal=SIGKILL --kill-whom=main $LOOP
	wait_for 60 "systemd to restart the killed loop" loop_restarted "$restarts" "$pid"
	ok "SIGKILL: systemd restarted the loop after RestartSec (pid $pid -> $(unit_prop $LOOP ExecMainPID))"
	wait_for 30 "the restarted loop to exit 78" bash -c "[ \"\$(docker exec $BOX systemctl show -P ActiveState $LOOP)\" = failed ]"
	[ "$(unit_prop $LOOP Result) $(unit_prop $LOOP ExecMainStatus)" = "exit-code 78" ] ||
		fail "the loop ended with $(unit_prop $LOOP Result) $(unit_prop $LOOP ExecMainStatus), want exit-code 78"
	[ "$(prio_of 'stopping the loop: AGENT_ENV_MISMATCH' $LOOP)" = "3 " ] || fail "no error line for 78: $(journal_since $LOOP | jq -r .MESSAGE)"
	restarts=$(unit_prop $LOOP NRestarts)
	sleep 40 # RestartSec=30s and a margin
	{ loop_is failed && [ "$(unit_prop $LOOP NRestarts)" = "$restarts" ]; } ||
		fail "the loop was restarted after 78: $(unit_prop $LOOP ActiveState), $(unit_prop $LOOP NRestarts) restarts"
	ok "AGENT_ENV_MISMATCH: the loop exits 78, the unit failed (an error line), not restarted after 40s (RestartPreventExitStatus=78)"
	# The latch holds until a bootstrap; then the loop starts again.
	admin PUT /faults -d '{}' >/dev/null
	admin POST "/envs/$ENV_ID/grants" | jq -r .grant | tr -d '\n' >"$work/grant-loop"
	docker cp "$work/grant-loop" "$BOX:/etc/monky-deployd/bootstrap.jwt"
	box chmod 0600 /etc/monky-deployd/bootstrap.jwt
	box monky-deployd bootstrap >/dev/null 2>&1 || fail "bootstrap"
	box systemctl reset-failed $LOOP
	local c
	c=$(checkins)
	box systemctl start $LOOP
	wait_for 30 "the loop's first tick after the bootstrap" more_checkins "$c"
	loop_is active || fail "the loop is $(unit_prop $LOOP ActiveState) after the bootstrap"
	ok "a bootstrap clears the latch; the loop starts and ticks again"
}

# given_up: how many check-ins tenancy saw the client give up on while it held them.
given_up() { admin GET /requests | jq '[.[] | select(.path == "/v1/agent/checkin" and .status == 499)] | length'; }
more_given_up() { [ "$(given_up)" -gt "$1" ]; }
sc_loop_stop() {
	# A tick in flight: tenancy holds the check-in for a minute (the config's
	# tenancy.timeout raised to 120s, so that the agent waits for it: the default gives
	# a call 24s). systemctl stop (SIGTERM) ends the tick and the loop within seconds,
	# with 0: a stop, not a failure.
	local g t0 took
	bsh "sed -i \"/^  transport: 'system'\\\$/a\\  timeout: '120s'\" /etc/monky-deployd/config.yaml && grep -qx \"  timeout: '120s'\" /etc/monky-deployd/config.yaml" ||
		fail "could not raise tenancy.timeout in the box's config"
	g=$(given_up)
	admin PUT /faults -d '{"delay_ms":{"checkin":60000}}' >/dev/null
	journal_mark
	box systemctl restart $LOOP
	# The first tick starts within 6s (a tenth of --interval), then its check-in is held.
	sleep 20
	t0=$SECONDS
	box systemctl stop $LOOP
	took=$((SECONDS - t0))
	if ! (wait_for 10 "the held check-in to be given up (499)" more_given_up "$g"); then
		admin GET /requests | jq -c '.[-5:][]' >&2
		journal_since "$LOOP" | jq -r "$jq_msg"' "     journal: \(.PRIORITY) \(msg)"' | tail -n 20 >&2
		admin PUT /faults -d '{}' >/dev/null
		fail "no check-in was in flight when the loop stopped"
	fi
	admin PUT /faults -d '{}' >/dev/null
	[ "$took" -le 20 ] || fail "the stop took ${took}s"
	[ "$(unit_prop $LOOP Result) $(unit_prop $LOOP ExecMainStatus)" = "success 0" ] ||
		fail "the stopped loop: $(unit_prop $LOOP Result) $(unit_prop $LOOP ExecMainStatus), want success 0"
	loop_is inactive || fail "the loop is $(unit_prop $LOOP ActiveState) after the stop"
	[ -n "$(prio_of 'stopping the loop on a signal' $LOOP)" ] || fail "no 'stopping the loop on a signal' line"
	ok "systemctl stop with a check-in held by tenancy: the loop ended in ${took}s with exit 0, the unit inactive, not failed"
}

sc_loop_back() {
	# shellcheck disable=SC2046 # kit_args_for prints words without spaces
	box bash /opt/monky/packaging/install.sh $(kit_args_for system) >"$work/kit-back.out" 2>&1 || {
		cat "$work/kit-back.out"
		fail "install.sh --transport system"
	}
	cat "$work/kit-back.out"
	grep -qx "install.sh: units: transport system: $TIMER enabled, active; $LOOP disabled, inactive" "$work/kit-back.out" ||
		fail "install.sh did not go back to the timer"
	[ "$(box systemctl is-enabled $LOOP || true)" = disabled ] || fail "the loop service is still enabled"
	box systemctl stop $TIMER
	ok "install.sh --transport system: the timer enabled and active again, the loop service disabled"
}

# --- scenario: the journal ------------------------------------------------------------------
sc_journal() {
	local token
	token=$(box cat /var/lib/monky-deployd/bao.token | tr -d '\n')
	[ -n "$token" ] || fail "no token to look for"
	box journalctl -o export >"$work/journal.export"
	[ -s "$work/journal.export" ] || fail "empty journal"
	printf '%s\n' "$secret" >"$work/secret"
	printf '%s\n' "$token" >"$work/token"
	local f v
	for f in secret grant1 grant2 token; do
		[ -s "$work/$f" ] || continue
		v=$(cat "$work/$f")
		if grep -aqF "$v" "$work/journal.export"; then
			fail "the journal carries the $f"
		fi
	done
	grep -qF "$secret" <<<"$(box cat /var/lib/monky-deployd/state.json)" && fail "state.json carries the secret"
	box journalctl -u $UNIT -o json | jq -r '.PRIORITY' | sort | uniq -c | sed 's/^/     priority count: /'
	box journalctl -u $UNIT -o json | jq -r 'select(.MESSAGE | test("^<[0-7]>")) | .MESSAGE' >"$work/raw"
	[ ! -s "$work/raw" ] || fail "journald kept a raw <N> prefix: $(head -n 3 "$work/raw")"
	ok "no secret, grant or token in the whole journal ($(wc -l <"$work/journal.export") lines) or state.json; priorities parsed by journald"
}

# --- scenario: systemd-analyze security online -------------------------------------------
sc_security() {
	local out exposure u
	for u in $UNIT $LOOP; do
		out=$(box systemd-analyze security --no-pager "$u")
		exposure=$(echo "$out" | sed -n "s/.*Overall exposure level for $u: \([0-9.]*\).*/\1/p")
		[ -n "$exposure" ] || fail "no exposure level of $u: $out"
		awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }' || fail "$u: exposure $exposure above $MAX_EXPOSURE"
		ok "systemd-analyze security $u (online, in the box): exposure $exposure (at most $MAX_EXPOSURE)"
	done
}

# --- scenario: remove and purge ------------------------------------------------------------
sc_remove_purge() {
	local sha cid
	sha=$(cat "$work/sha")
	box apt-get remove -y monky-deployd >/dev/null 2>&1 || fail "apt-get remove"
	[ "$(box systemctl is-active $TIMER || true)" != active ] || fail "the timer is still active after remove"
	bsh "test -f /etc/monky-deployd/config.yaml && test -f /var/lib/monky-deployd/state.json && test -d $KIT_DIR/releases/$sha" ||
		fail "remove deleted config, state or releases"
	cid=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT")
	[ -n "$cid" ] || fail "remove stopped the containers"
	ok "remove: timer stopped; config, state, releases and the running containers kept"
	box apt-get purge -y monky-deployd >/dev/null 2>&1 || fail "apt-get purge"
	bsh '! test -e /etc/monky-deployd && ! test -e /var/lib/monky-deployd && ! test -e /var/lib/monky-deployd-hold && ! test -e /etc/systemd/system/monky-deployd.service.d/deploy-dir.conf && ! test -e /etc/systemd/system/monky-deployd-loop.service.d/deploy-dir.conf' ||
		fail "purge left config, state, the hold dir or a drop-in"
	bsh "test -d $KIT_DIR/releases/$sha" || fail "purge deleted the releases"
	[ -n "$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT")" ] || fail "purge stopped the containers"
	ok "purge: config, state, the hold dir and the drop-ins gone; the deploy dir and the containers kept"
	bsh "cd $KIT_DIR/current && docker compose down" >/dev/null 2>&1 || fail "docker compose down in $KIT_DIR/current"
	[ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")" ] || fail "containers left after compose down"
	ok "'cd $KIT_DIR/current && docker compose down' takes the environment down, as the docs say"
}

# --- scenario: the ansible role ----------------------------------------------------------------
sc_ansible() {
	admin PUT /faults -d '{}' >/dev/null
	# Without compose v2 the timer's ticks stop before the grant is used, so the second
	# run sees the box as the first one left it.
	box rm -f $PLUGIN_IN_BOX
	admin POST "/envs/$ENV_ID/grants" | jq -r .grant | tr -d '\n' >"$work/grant3"
	jq -n --arg env "$ENV_ID" --arg t "$tenancy_url" --arg b "$bao_addr" --arg d "$ROLE_DIR" \
		--arg p "$PROJECT" --arg g "$(cat "$work/grant3")" \
		'{monky_deployd_deb: "/opt/monky/monky-deployd.deb", monky_deployd_env_id: $env, monky_deployd_tenancy_url: $t,
		  monky_deployd_transport: "system", monky_deployd_bao_addr: $b, monky_deployd_deploy_dir: $d,
		  monky_deployd_compose_project: $p, monky_deployd_min_free_mb: 1, monky_deployd_health_timeout: "60s",
		  monky_deployd_grant: $g}' >"$work/vars.json"
	docker cp "$work/vars.json" "$BOX:/opt/monky/vars.json"
	printf '[monky_docker_hosts]\nlocalhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3 ansible_become=false\n' >"$work/inventory"
	docker cp "$work/inventory" "$BOX:/opt/monky/inventory"
	local play="ANSIBLE_ROLES_PATH=/opt/monky/packaging/ansible/roles ANSIBLE_NOCOLOR=1 ansible-playbook -i /opt/monky/inventory -e @/opt/monky/vars.json /opt/monky/packaging/ansible/site.yml"
	bsh "$play" >"$work/role1.out" 2>&1 || {
		cat "$work/role1.out"
		fail "the role, first run"
	}
	grep -E '^localhost' "$work/role1.out"
	grep -qE 'localhost +: ok=[0-9]+ +changed=[1-9]' "$work/role1.out" || fail "the first run changed nothing"
	grep -qF "$(cat "$work/grant3")" "$work/role1.out" && fail "ansible printed the grant"
	[ "$(box systemctl is-active $TIMER)" = active ] || fail "the role did not start the timer"
	{ [ "$(box systemctl is-enabled $LOOP || true)" = disabled ] && loop_is inactive; } || fail "the role enabled the loop service for transport system"
	grep -q "$ROLE_DIR" <<<"$(unit_prop $UNIT ReadWritePaths)" || fail "the role's drop-in is not loaded"
	grep -q "$ROLE_DIR" <<<"$(unit_prop $LOOP ReadWritePaths)" || fail "the role's drop-in of the loop service is not loaded"
	ok "the role: apt installed the .deb, config, grant, drop-ins for $ROLE_DIR loaded, transport system: timer active, loop service disabled"
	bsh "$play" >"$work/role2.out" 2>&1 || {
		cat "$work/role2.out"
		fail "the role, second run"
	}
	grep -E '^localhost' "$work/role2.out"
	grep -qE 'localhost +: ok=[0-9]+ +changed=0 +unreachable=0 +failed=0' "$work/role2.out" || fail "the second run changed something"
	ok "the role again: changed=0"
	# With compose v2 back, a tick applies through the role's drop-in.
	docker cp "$host_plugin" "$BOX:$PLUGIN_IN_BOX"
	box systemctl stop $TIMER
	box systemctl reset-failed $UNIT
	local n
	n=$(reports)
	box systemctl start $UNIT || fail "the tick after the role failed: $(box journalctl -u $UNIT -n 20 --no-pager)"
	[ "$(reports)" -gt "$n" ] || fail "no report"
	local last
	last=$(admin GET "/envs/$ENV_ID/reports" | jq -r '.[-1] | "\(.result) \(.sha)"')
	[ "${last%% *}" = applied ] || fail "the last report is not applied: $last"
	# The sha of the report, not of an earlier scenario: a failure there does not fail this one.
	bsh "test -d $ROLE_DIR/releases/${last#* }" || fail "no release ${last#* } under $ROLE_DIR"
	ok "a tick applies ${last#* } into $ROLE_DIR through the role's drop-in"
	bsh "cd $ROLE_DIR/current && docker compose down" >/dev/null 2>&1 || fail "compose down"
	# transport sdk: the role enables the loop service instead of the timer.
	bsh "$play -e monky_deployd_transport=sdk -e monky_deployd_force_config=true" >"$work/role3.out" 2>&1 || {
		cat "$work/role3.out"
		fail "the role with transport sdk"
	}
	grep -E '^localhost' "$work/role3.out"
	[ "$(box systemctl is-enabled $LOOP)" = enabled ] || fail "the role did not enable the loop service for transport sdk"
	case $(unit_prop $LOOP ActiveState) in active | activating) ;; *) fail "the loop service is $(unit_prop $LOOP ActiveState)" ;; esac
	{ [ "$(box systemctl is-enabled $TIMER || true)" = disabled ] && [ "$(box systemctl is-active $TIMER || true)" = inactive ]; } ||
		fail "the role left the timer enabled or active for transport sdk"
	ok "the role with transport sdk: $LOOP enabled and started, $TIMER disabled and inactive"
	box apt-get purge -y monky-deployd >/dev/null 2>&1 || fail "purge"
	loop_is inactive || fail "purge left the loop service $(unit_prop $LOOP ActiveState)"
	bsh '! test -e /etc/systemd/system/multi-user.target.wants/monky-deployd-loop.service' || fail "purge left the loop service's enable link"
	ok "purge stops the loop service and removes the link the role's enable made"
}

# ---------------------------------------------------------------------------------------------
scenario "prepare: .deb, monky-fakes, app image, box docker CLI" prepare_builds needed
prepare_bundle_t0=$SECONDS
if [ -z "$broken" ]; then
	prepare_bundle
	tenancy_url=$(jq -r .tenancy_url "$work/fakes.json")
	bao_addr=$(jq -r .bao_addr "$work/fakes.json")
	admin_url=$(jq -r .admin_url "$work/fakes.json")
	app_image=$(cat "$work/app_image")
	# The bundle: one service of the locally built image, a secret from OpenBao.
	mkdir -p "$work/bundle"
	cat >"$work/bundle/compose.yaml" <<COMPOSE
services:
  app:
    image: $app_image
    pull_policy: never
    command: ["serve"]
    labels:
      monky-systemd-box: "1"
    environment:
      LOG_LEVEL: \${LOG_LEVEL}
      DB_PASSWORD: \${DB_PASSWORD}
    healthcheck:
      test: ["CMD", "/app", "health"]
      interval: 1s
      timeout: 5s
      retries: 3
COMPOSE
	jq -n --arg env "$ENV_ID" '{schema: 1, env_id: $env, serial: 1, compose_files: ["compose.yaml"],
		files: ["compose.yaml"], vars: {LOG_LEVEL: "info"}, secrets: {DB_PASSWORD: {path: "db", key: "password"}}}' >"$work/bundle/manifest.json"
	tar -C "$work/bundle" -cf "$work/bundle.tar" manifest.json compose.yaml
	admin POST "/envs/$ENV_ID/bundles" --data-binary "@$work/bundle.tar" | jq -c .
	admin PUT "/envs/$ENV_ID/secrets/db" -d "$(jq -n --arg p "$secret" '{password: $p}')" >/dev/null
fi
names+=("prepare: fakes and the bundle") results+=(PASS) times+=($((SECONDS - prepare_bundle_t0)))
scenario "prepare: box image (debootstrap rootfs, cached)" prepare_box_image needed
box_image=$(cat "$work/box_image" 2>/dev/null || true)
scenario "box: systemd as PID 1 reaches running/degraded" sc_boot needed
scenario "stock Debian 12: apt accepts the .deb with Debian's docker.io" sc_stock_debian
scenario "deb: apt install, timer enabled not started, purge" sc_deb
scenario "install.sh: apt + systemctl path, custom deploy dir, idempotent" sc_install_kit needed
scenario "no compose v2: COMPOSE_MISSING, exit 1, no check-in" sc_no_compose
scenario "timer: a tick applies the bundle on the engine (sandbox)" sc_timer_apply needed
scenario "idle tick: check-in answered none, exit 0, no lease, no report" sc_idle_tick
scenario "hold: a member of monky-hold holds and clears; prepared, not queued" sc_hold
scenario "exit 75: success for the unit, warning in the journal" sc_exit75
scenario "exit 78: unit failed, timer keeps running, latch" sc_exit78
scenario "loop: install.sh --transport sdk enables it, not the timer; exit 1 restarted" sc_loop_install
scenario "loop: ticks in one process, survives a 75, backs off" sc_loop_ticks
scenario "loop: a crash is restarted, 78 is not (RestartPreventExitStatus)" sc_loop_crash_78
scenario "loop: SIGTERM ends a tick in flight and the loop within seconds, 0" sc_loop_stop
scenario "loop: install.sh --transport system goes back to the timer" sc_loop_back
scenario "journal: priorities, no secret, grant or token" sc_journal
scenario "security: systemd-analyze security online <= $MAX_EXPOSURE" sc_security
scenario "remove and purge: config, state, releases, containers" sc_remove_purge
scenario "ansible: role applied with the local connection, idempotent" sc_ansible

# --- the table ------------------------------------------------------------------------------
failed=0
printf '\n%-66s %-8s %s\n' scenario result seconds
printf '%-66s %-8s %s\n' "$(printf '%.0s-' {1..66})" ------ -------
for i in "${!names[@]}"; do
	printf '%-66s %-8s %s\n' "${names[$i]}" "${results[$i]%% *}" "${times[$i]}"
	[ "${results[$i]}" = PASS ] || failed=$((failed + 1))
done
passed=$((${#names[@]} - failed))
printf '\ntest/systemd: %ss in all\nsystemd: %d passed, %d failed\n' "$((SECONDS - start_all))" "$passed" "$failed"
[ "$failed" = 0 ]
