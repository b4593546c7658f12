#!/usr/bin/env bash
# build-deb.sh VERSION OUTDIR [GO_PACKAGE]
#
# Builds monky-deployd_VERSION_ARCH.deb into OUTDIR with dpkg-deb: the one binary
# /usr/bin/monky-deployd (CGO_ENABLED=0, -trimpath, the git commit stamped into
# main.commit); the systemd units (monky-deployd.service and its timer for proxy and
# system boxes, monky-deployd-loop.service for sdk boxes), the example config (the real
# config is not shipped: install.sh or the ansible role writes it), the maintainer
# scripts. VERSION must equal deployd.Version (deployd/version.go). GO_PACKAGE defaults
# to ./cmd/monky-deployd.
set -euo pipefail

usage() { echo "usage: $0 VERSION OUTDIR [GO_PACKAGE]" >&2; exit 2; }
if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage; fi
version=$1
outdir=$2
gopkg=${3:-./cmd/monky-deployd}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([~+][0-9A-Za-z.~+]+)?$ ]]; then
	echo "build-deb: VERSION must look like 1.2.3 (optionally ~rc1 or +build), got an invalid one" >&2
	exit 2
fi
code_version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$repo/deployd/version.go")
if [ "$version" != "$code_version" ]; then
	echo "build-deb: VERSION $version differs from deployd.Version '$code_version' (deployd/version.go)" >&2
	exit 1
fi

arch=$(cd "$repo" && go env GOARCH)
case $arch in
amd64 | arm64 | armhf | i386 | ppc64el | s390x | riscv64) ;;
arm) arch=armhf ;;
386) arch=i386 ;;
ppc64le) arch=ppc64el ;;
*) echo "build-deb: no Debian architecture for GOARCH $arch" >&2; exit 1 ;;
esac

commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root

install -d -m 0755 "$root/usr/bin"
echo "build-deb: building $gopkg as /usr/bin/monky-deployd ($version, commit $commit, $arch)"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X main.commit=$commit" \
	-o "$root/usr/bin/monky-deployd" "$gopkg")
chmod 0755 "$root/usr/bin/monky-deployd"

install -d -m 0755 "$root/lib/systemd/system" "$root/etc/monky-deployd" \
	"$root/usr/share/doc/monky-deployd" "$root/var/lib"
install -m 0644 "$here/systemd/monky-deployd.service" "$here/systemd/monky-deployd.timer" \
	"$here/systemd/monky-deployd-loop.service" "$here/systemd/monky-deployd-hold.path" "$root/lib/systemd/system/"
install -m 0644 "$here/config.yaml.example" "$root/etc/monky-deployd/config.yaml.example"
chmod 0750 "$root/etc/monky-deployd"
install -d -m 0700 "$root/var/lib/monky-deployd"
install -m 0644 "$here/debian/copyright" "$root/usr/share/doc/monky-deployd/copyright"
if [ -f "$repo/docs/OPERATIONS.md" ]; then
	install -m 0644 "$repo/docs/OPERATIONS.md" "$root/usr/share/doc/monky-deployd/OPERATIONS.md"
fi
# Debian wants a Debian-format changelog.gz; it points at the project's CHANGELOG.md,
# shipped beside it. Its date is the release's date in CHANGELOG.md (reproducible).
release_date=$(sed -n "s/^## \\[$version\\] - \\([0-9-]*\\)\$/\\1/p" "$repo/CHANGELOG.md" | head -n1)
if [ -z "$release_date" ]; then
	echo "build-deb: CHANGELOG.md has no '## [$version] - YYYY-MM-DD' heading" >&2
	exit 1
fi
install -m 0644 "$repo/CHANGELOG.md" "$root/usr/share/doc/monky-deployd/CHANGELOG.md"
{
	printf 'monky-deployd (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Release %s: see /usr/share/doc/monky-deployd/CHANGELOG.md.\n\n' "$version"
	printf ' -- Monky platform team <platform@monky.internal>  %s\n' "$(LC_ALL=C date -u -d "$release_date" '+%a, %d %b %Y %H:%M:%S +0000')"
} | gzip -9n >"$root/usr/share/doc/monky-deployd/changelog.gz"
chmod 0644 "$root/usr/share/doc/monky-deployd/changelog.gz"
install -d -m 0755 "$root/usr/share/lintian/overrides"
install -m 0644 "$here/debian/lintian-overrides" "$root/usr/share/lintian/overrides/monky-deployd"

install -d -m 0755 "$root/DEBIAN"
for s in postinst prerm postrm; do
	install -m 0755 "$here/debian/$s" "$root/DEBIAN/$s"
done
printf '%s\n' /etc/monky-deployd/config.yaml.example >"$root/DEBIAN/conffiles"
chmod 0644 "$root/DEBIAN/conffiles"

(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

installed_size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: monky-deployd
Version: $version
Architecture: $arch
Maintainer: Monky platform team <platform@monky.internal>
Installed-Size: $installed_size
Depends: docker-ce | docker.io
Recommends: docker-compose-plugin | docker-compose-v2 | docker-compose (>= 2)
Section: admin
Priority: optional
Homepage: https://git.monky.internal/platform/monky-deployd
Description: on-box pull agent for Monky backend environments
 monky-deployd runs on docker VMs and laptops. Each tick it checks in with
 monky-tenancy, verifies the published bundle before it asks for a deploy
 lease, reads the environment's secrets from OpenBao, stages and promotes a
 release, runs docker compose, waits for health and reports. Boxes on the
 OpenZiti SDK transport run it as one long-running process
 (monky-deployd-loop.service, one OpenZiti context); boxes on a tunneler's
 proxy or a direct connection run one tick a minute from a systemd timer.
 The package enables the timer; the agent starts working once
 /etc/monky-deployd/config.yaml exists. install.sh or the ansible role writes
 it and enables the unit the config's transport calls for.
CONTROL
chmod 0644 "$root/DEBIAN/control"

deb=$outdir/monky-deployd_${version}_${arch}.deb
dpkg-deb --build --root-owner-group -Zxz "$root" "$deb" >/dev/null
echo "build-deb: wrote $deb"
