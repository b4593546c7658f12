#!/usr/bin/env bash
# dockerd.sh — a docker engine for the real-engine tests (test/engine) and CI.
#
#   sudo bash test/engine/dockerd.sh start   # install docker.io and docker-registry if needed, start dockerd, wait for it
#   sudo bash test/engine/dockerd.sh stop    # stop the dockerd this script started
#
# start is a no-op when an engine already answers on the default socket (a developer's
# own engine is used as it is, and left running). Otherwise it installs Debian's
# docker.io (dockerd 20.10) when dockerd is missing and starts dockerd with its data
# under $MONKY_DOCKERD_DIR (default /var/tmp/monky-deployd-dockerd), so that CI's
# images and containers never mix with anything else; stop ends it and removes that
# directory. The tests label or project-name everything they create and remove it.
set -euo pipefail

dir="${MONKY_DOCKERD_DIR:-/var/tmp/monky-deployd-dockerd}"

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "dockerd.sh: run as root (sudo bash $0 $1)" >&2
		exit 1
	fi
}

# registry installs Debian's docker-registry, the local registry the pull scenarios
# push to and pull from (the tests run it themselves on a loopback port).
registry() {
	if command -v docker-registry >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
		return 0
	fi
	echo "dockerd.sh: installing Debian's docker-registry (for the pull scenarios)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends docker-registry >/dev/null
}

start() {
	registry
	if docker info >/dev/null 2>&1; then
		echo "dockerd.sh: an engine already answers ($(docker info --format '{{.ServerVersion}}')); using it"
		return 0
	fi
	need_root start
	if ! command -v dockerd >/dev/null 2>&1; then
		echo "dockerd.sh: installing Debian's docker.io"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q >/dev/null
		apt-get install -y -q --no-install-recommends docker.io >/dev/null
	fi
	mkdir -p "$dir"
	echo "dockerd.sh: starting dockerd (data under $dir, log $dir/dockerd.log)"
	nohup dockerd --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
		>"$dir/dockerd.log" 2>&1 </dev/null &
	for _ in $(seq 1 60); do
		if docker info >/dev/null 2>&1; then
			echo "dockerd.sh: dockerd $(docker info --format '{{.ServerVersion}}') is up ($(docker info --format '{{.Driver}}'), cgroup $(docker info --format '{{.CgroupVersion}}'))"
			return 0
		fi
		sleep 1
	done
	echo "dockerd.sh: dockerd did not answer within 60s; its log:" >&2
	tail -40 "$dir/dockerd.log" >&2
	exit 1
}

stop() {
	if [ ! -f "$dir/dockerd.pid" ]; then
		echo "dockerd.sh: no dockerd of this script is running"
		return 0
	fi
	need_root stop
	pid=$(cat "$dir/dockerd.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 30); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	kill -9 "$pid" 2>/dev/null || true
	# Containers of this engine are gone with it; its overlay mounts may linger.
	grep -o " $dir/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$dir"
	echo "dockerd.sh: stopped dockerd $pid"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
