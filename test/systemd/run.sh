#!/usr/bin/env bash
# run.sh — the packages on a real systemd: CI boots the .deb under systemd and drives
# the real engine (docs/OPERATIONS.md, "The packages under systemd").
#
#   bash test/systemd/run.sh
#
# Boots a Debian 12 container with systemd as PID 1 (the "box", from a cached
# debootstrap rootfs: rootfs.sh) on the docker engine of this machine, with the
# engine's socket mounted and the host's network, and runs the scenarios below under
# that systemd: the .deb installed with apt, install.sh and the ansible role for real,
# the timer firing ticks that apply a bundle on the real engine (the unit runs
# monky-deployd-tick, which hands them to monky-deployd next to it), an idle tick the
# tick binary does itself, exit codes 75 and 78 as the unit sees them, the sandbox, the
# journal, remove and purge, the exposure measured online, and a box without docker
# compose v2. The agent talks to monky-fakes on loopback (transport: system). Prints a
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
# journal_since CURSOR_FILE: the unit's journal (JSON lines) since the saved cursor.
journal_mark() { box journalctl -n 1 -o cat --show-cursor -q | sed -n 's/^-- cursor: //p' >"$work/cursor"; }
journal_since() {
	local c
	c=$(cat "$work/cursor")
	if [ -n "$c" ]; then
		box journalctl -u "$UNIT" -o json --after-cursor="$c"
	else
		box journalctl -u "$UNIT" -o json
	fi
}
# prio_of PATTERN: the syslog priorities of the unit's journal lines (since the mark)
# whose message matches PATTERN.
prio_of() { journal_since | jq -r --arg p "$1" 'select(.MESSAGE | test($p)) | .PRIORITY' | sort -u | tr '\n' ' '; }

# ---------------------------------------------------------------------------------------
# prepare: the .deb, monky-fakes, the app image, the bundle, the box image.

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/contract/contract.go)
deb=$work/out/monky-deployd_${version}_$(dpkg --print-architecture).deb
secret="sysbox-secret-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
app_image=""
box_image=""

prepare_builds() {
	# The .deb as CI builds it: the agent and the timer's tick, side by side in /usr/bin.
	bash packaging/build-deb.sh "$version" "$work/out" ./cmd/monky-deployd ./cmd/monky-deployd-tick
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
	got=$(bsh 'stat -c "%n %F %a %U:%G" /usr/bin/monky-deployd /usr/bin/monky-deployd-tick' | tr '\n' ' ')
	[ "$got" = "/usr/bin/monky-deployd regular file 755 root:root /usr/bin/monky-deployd-tick regular file 755 root:root " ] ||
		fail "binaries: $got"
	unit_prop $UNIT ExecStart | grep -q 'path=/usr/bin/monky-deployd-tick ; argv\[\]=/usr/bin/monky-deployd-tick run --config /etc/monky-deployd/config.yaml --metrics-file ' ||
		fail "the service does not run /usr/bin/monky-deployd-tick: $(unit_prop $UNIT ExecStart)"
	[ "$(box monky-deployd-tick version)" = "$(box monky-deployd version)" ] || fail "monky-deployd-tick version is not the agent's answer"
	ok "/usr/bin/monky-deployd-tick next to /usr/bin/monky-deployd (0755 root), the service runs the tick, which hands 'version' to the agent"
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
	bsh "grep -qx 'ReadWritePaths=$KIT_DIR' /etc/systemd/system/monky-deployd.service.d/deploy-dir.conf" || fail "no deploy-dir drop-in"
	unit_prop $UNIT ReadWritePaths | grep -q "$KIT_DIR" ||
		fail "systemd did not load the drop-in: ReadWritePaths=$(unit_prop $UNIT ReadWritePaths)"
	[ "$(box stat -c %a /etc/monky-deployd/config.yaml /etc/monky-deployd/bootstrap.jwt | tr '\n' ' ')" = "640 600 " ] ||
		fail "config or grant mode"
	ok "install.sh: apt-get install of the .deb, config 0640, grant 0600, drop-in for $KIT_DIR loaded, timer enabled and active"
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
	docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$cid" | grep -qxF "DB_PASSWORD=$secret" || fail "the secret did not reach the container"
	ok "container $(docker inspect -f '{{.Name}}' "$cid") healthy on the engine, with the secret read from OpenBao"
	[ "$(prio_of 'msg="tick done"')" = "6 " ] || fail "tick done priority: $(prio_of 'msg="tick done"')"
	box systemctl stop $TIMER
}

# --- scenario: an idle tick done by monky-deployd-tick itself ------------------------------
sc_idle_tick() {
	# After the apply the box is steady: when tenancy answers none (the fakes keep
	# answering apply of the live sha until told otherwise), the tick binary the unit
	# runs does that tick without handing it to the agent. Its debug lines say which:
	# it logs "handing the tick to the full agent" before every exec. (The other
	# scenarios' ticks are handed over: the bootstrap and apply, exit 78.)
	local desired
	desired=$(jq -nc --arg sha "$(cat "$work/sha")" '{action: "apply", sha: $sha, serial: 1}')
	admin PUT "/envs/$ENV_ID/desired" -d '{"action":"none"}' >/dev/null
	box systemctl set-environment MONKY_DEPLOYD_DEBUG=1
	# shellcheck disable=SC2064 # $desired is expanded now, on purpose
	trap "box systemctl unset-environment MONKY_DEPLOYD_DEBUG; admin PUT /envs/$ENV_ID/desired -d '$desired' >/dev/null" EXIT
	local n
	n=$(reports)
	journal_mark
	box systemctl start $UNIT || fail "the idle tick failed: $(box journalctl -u $UNIT -n 20 --no-pager)"
	[ "$(unit_prop $UNIT Result) $(unit_prop $UNIT ExecMainStatus)" = "success 0" ] || fail "the idle tick did not exit 0"
	[ "$(prio_of 'msg="tick done"')" = "6 " ] || fail "no 'tick done' line: $(journal_since | jq -r .MESSAGE)"
	if [ -n "$(prio_of 'handing the tick to the full agent')" ]; then
		journal_since | jq -r .MESSAGE
		fail "monky-deployd-tick handed a steady box's idle tick to the agent"
	fi
	[ "$(reports)" = "$n" ] || fail "an idle tick reported"
	ok "a steady box's idle tick (check-in answered none) done by monky-deployd-tick itself, exit 0, no hand-over"
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
	box cat /var/lib/monky-deployd/state.json | grep -qF "$secret" && fail "state.json carries the secret"
	box journalctl -u $UNIT -o json | jq -r '.PRIORITY' | sort | uniq -c | sed 's/^/     priority count: /'
	box journalctl -u $UNIT -o json | jq -r 'select(.MESSAGE | test("^<[0-7]>")) | .MESSAGE' | head -n 3 >"$work/raw"
	[ ! -s "$work/raw" ] || fail "journald kept a raw <N> prefix: $(cat "$work/raw")"
	ok "no secret, grant or token in the whole journal ($(wc -l <"$work/journal.export") lines) or state.json; priorities parsed by journald"
}

# --- scenario: systemd-analyze security online -------------------------------------------
sc_security() {
	local out exposure
	out=$(box systemd-analyze security --no-pager $UNIT)
	exposure=$(echo "$out" | sed -n 's/.*Overall exposure level for monky-deployd.service: \([0-9.]*\).*/\1/p')
	[ -n "$exposure" ] || fail "no exposure level: $out"
	awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }' || fail "exposure $exposure above $MAX_EXPOSURE"
	ok "systemd-analyze security (online, in the box): exposure $exposure (at most $MAX_EXPOSURE)"
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
	bsh '! test -e /etc/monky-deployd && ! test -e /var/lib/monky-deployd && ! test -e /etc/systemd/system/monky-deployd.service.d/deploy-dir.conf' ||
		fail "purge left config, state or the drop-in"
	bsh "test -d $KIT_DIR/releases/$sha" || fail "purge deleted the releases"
	[ -n "$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT")" ] || fail "purge stopped the containers"
	ok "purge: config, state and drop-in gone; the deploy dir and the containers kept"
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
	unit_prop $UNIT ReadWritePaths | grep -q "$ROLE_DIR" || fail "the role's drop-in is not loaded"
	ok "the role: apt installed the .deb, config, grant, drop-in for $ROLE_DIR loaded, timer active"
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
	[ "$(admin GET "/envs/$ENV_ID/reports" | jq -r '.[-1].result')" = applied ] || fail "the last report is not applied"
	bsh "test -d $ROLE_DIR/releases/$(cat "$work/sha")" || fail "no release under $ROLE_DIR"
	ok "a tick applies into $ROLE_DIR through the role's drop-in"
	bsh "cd $ROLE_DIR/current && docker compose down" >/dev/null 2>&1 || fail "compose down"
	box apt-get purge -y monky-deployd >/dev/null 2>&1 || fail "purge"
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
scenario "idle tick: done by monky-deployd-tick itself, no hand-over" sc_idle_tick
scenario "exit 75: success for the unit, warning in the journal" sc_exit75
scenario "exit 78: unit failed, timer keeps running, latch" sc_exit78
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
