#!/usr/bin/env bash
# rootfs.sh — the Debian 12 root file system of the systemd box, cached by its inputs.
#
#   bash test/systemd/rootfs.sh        prints the path of the cached tarball, building it first if needed
#
# debootstrap --variant=minbase from the Debian mirror apt is configured with (or
# MONKY_BOX_MIRROR), with systemd as init and what the scenarios need inside the box
# (ansible-core and python3-apt for the role's local run). The tarball is kept in
# $MONKY_BOX_CACHE (default /var/cache/monky-deployd/systemd-box) as <key>.tar, the key
# being the sha256 of this file and the mirror, so that CI on a fresh clone of the same
# commit reuses it. Runs as root; installs debootstrap with apt when missing.
set -euo pipefail

SUITE=bookworm
VARIANT=minbase
# systemd as PID 1 and dbus for systemctl, by debootstrap; then, with apt in a chroot
# (debootstrap's own resolver fails to configure python3-cryptography), ansible-core
# and python3-apt for the role applied with the local connection inside the box. No
# docker.io: the box uses the host's engine through its socket (run.sh builds a
# package of the host's docker CLI).
PACKAGES=systemd,systemd-sysv,dbus
EXTRA="ansible-core python3-apt"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${MONKY_BOX_CACHE:-/var/cache/monky-deployd/systemd-box}

# mirror: the Debian archive apt uses for the $SUITE main component.
mirror=${MONKY_BOX_MIRROR:-}
if [ -z "$mirror" ]; then
	# shellcheck disable=SC2016 # apt expands $(REPO_URI), not the shell
	mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' 2>/dev/null |
		awk -v s="$SUITE" '$2 == s && $3 == "main" { print $1; exit }')
fi
if [ -z "$mirror" ]; then
	echo "rootfs.sh: no apt source for $SUITE main; set MONKY_BOX_MIRROR=http://…/debian" >&2
	exit 1
fi
arch=$(dpkg --print-architecture)
key=$( (cat "$here/rootfs.sh"; echo "$mirror $arch") | sha256sum | cut -c1-16)
tarball=$cache/debian-$SUITE-$arch-$key.tar

if [ ! -s "$tarball" ]; then
	if ! command -v debootstrap >/dev/null 2>&1; then
		echo "rootfs.sh: installing debootstrap" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null; }
	fi
	mkdir -p "$cache"
	work=$(mktemp -d "$cache/.build-XXXXXX")
	trap 'umount "$work/root/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
	echo "rootfs.sh: debootstrap $SUITE ($VARIANT, $PACKAGES; then $EXTRA) from $mirror; takes a few minutes once" >&2
	start=$SECONDS
	if ! nice -n 10 debootstrap --variant="$VARIANT" --include="$PACKAGES" --arch="$arch" \
		"$SUITE" "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1; then
		tail -n 30 "$work/debootstrap.log" >&2
		echo "rootfs.sh: debootstrap failed" >&2
		exit 1
	fi
	r=$work/root
	mount -t proc proc "$r/proc"
	printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
	chmod 0755 "$r/usr/sbin/policy-rc.d"
	# shellcheck disable=SC2086 # EXTRA is a list of package names
	if ! { chroot "$r" apt-get update -q && DEBIAN_FRONTEND=noninteractive chroot "$r" \
		apt-get install -y -q --no-install-recommends $EXTRA; } >"$work/apt.log" 2>&1; then
		tail -n 30 "$work/apt.log" >&2
		echo "rootfs.sh: apt-get install $EXTRA in the chroot failed" >&2
		exit 1
	fi
	rm -f "$r/usr/sbin/policy-rc.d"
	umount "$r/proc"
	# Smaller and quieter: no downloaded packages, no apt lists (the box installs local
	# .debs only), no machine-id (systemd makes one at each boot).
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* "$r"/var/log/*.log
	: >"$r/etc/machine-id"
	echo monky-systemd-box >"$r/etc/hostname"
	# Nothing in the box may touch the host's network (it shares it) or wait for a tty.
	for u in systemd-networkd.service systemd-networkd.socket systemd-networkd-wait-online.service \
		systemd-resolved.service systemd-timesyncd.service getty@tty1.service console-getty.service \
		systemd-udevd.service systemd-udev-trigger.service systemd-firstboot.service \
		docker.service docker.socket containerd.service apt-daily.timer apt-daily-upgrade.timer \
		e2scrub_all.timer e2scrub_reap.service fstrim.timer; do
		ln -sfn /dev/null "$r/etc/systemd/system/$u"
	done
	tar --numeric-owner -C "$r" -cf "$work/rootfs.tar" .
	mv -f "$work/rootfs.tar" "$tarball"
	echo "rootfs.sh: built $tarball in $((SECONDS - start))s" >&2
fi
echo "$tarball"
