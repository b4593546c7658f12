#!/usr/bin/env bash
# check.sh — every packaging check, the one script CI calls (bash packaging/check.sh).
#
# Installs what it needs with apt (one apt-get update), then: bash -n and shellcheck on
# every *.sh of the repo and the maintainer scripts; the ansible template re-rendered and
# diffed against packaging/testdata; the .deb built, unpacked and checked file by file
# (one binary, three units), lintian on it; systemd-analyze verify and security on the
# units; install.sh --root run twice (idempotent) with its config diffed against
# packaging/testdata, and its choice of unit by transport; the Go tests of
# packaging/ (configs parse with the agent's parser, one version). Runs as root on a
# fresh Debian machine; changes nothing outside a temp dir except the apt installs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"

step() { printf '\n--- packaging: %s\n' "$*"; }
ok() { printf 'ok   %s\n' "$*"; }
fail() {
	printf 'FAIL %s\n' "$*" >&2
	exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- tools ----------------------------------------------------------------------------
step "tools"
need=()
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v lintian >/dev/null 2>&1 || need+=(lintian)
command -v dpkg-deb >/dev/null 2>&1 || need+=(dpkg)
/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1 || need+=(python3-jinja2)
/usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || need+=(python3-yaml)
command -v ansible-playbook >/dev/null 2>&1 || need+=(ansible-core)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		fail "missing ${need[*]}: run as root or install them"
	fi
	echo "installing: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
ok "shellcheck $(shellcheck --version | sed -n 's/^version: //p'), $(systemd-analyze --version | head -n1), lintian $(lintian --version | awk '{print $2}'), $(ansible-playbook --version | head -n1)"

# --- shell scripts --------------------------------------------------------------------
step "bash -n and shellcheck"
mapfile -t scripts < <(find . -path ./.git -prune -o -name '*.sh' -type f -print | LC_ALL=C sort)
[ ${#scripts[@]} -gt 0 ] || fail "no *.sh found"
for f in "${scripts[@]}"; do
	bash -n "$f" || fail "bash -n $f"
	shellcheck -x "$f" || fail "shellcheck $f"
	ok "$f"
done
for f in packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm; do
	sh -n "$f" || fail "sh -n $f"
	shellcheck -s sh "$f" || fail "shellcheck $f"
	[ -x "$f" ] || fail "$f is not executable"
	head -n1 "$f" | grep -qx '#!/bin/sh' || fail "$f must start with #!/bin/sh"
	grep -qx 'set -e' "$f" || fail "$f must 'set -e'"
	ok "$f (POSIX sh, set -e)"
done

# --- ansible template -----------------------------------------------------------------
step "ansible template renders to the committed samples"
for pair in ansible-vars.json:config.ansible.yaml ansible-vars-proxy.json:config.ansible-proxy.yaml ansible-vars-keys.json:config.ansible-keys.yaml; do
	vars=packaging/testdata/${pair%%:*}
	want=packaging/testdata/${pair##*:}
	/usr/bin/python3 packaging/ansible/render.py "$vars" >"$work/rendered.yaml"
	diff -u "$want" "$work/rendered.yaml" || fail "template output differs from $want (re-render: packaging/ansible/render.py $vars > $want)"
	ok "$vars -> $want"
done

step "ansible: syntax check, the template rendered by ansible itself, the role's checks"
export ANSIBLE_LOCAL_TEMP=$work/ansible-tmp ANSIBLE_HOME=$work/ansible-home ANSIBLE_NOCOLOR=1 \
	ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false
ANSIBLE_ROLES_PATH=packaging/ansible/roles ansible-playbook --syntax-check -i localhost, packaging/ansible/site.yml >"$work/ansible.out" 2>&1 ||
	{ cat "$work/ansible.out"; fail "ansible-playbook --syntax-check site.yml"; }
ok "packaging/ansible/site.yml and the role pass --syntax-check"
render_with_ansible() { # VARS(absolute) OUT
	ansible-playbook -i localhost, packaging/ansible/tests/render.yml -e "vars_file=$1" -e "out=$2" >"$work/ansible.out" 2>&1
}
for pair in ansible-vars.json:config.ansible.yaml ansible-vars-proxy.json:config.ansible-proxy.yaml ansible-vars-keys.json:config.ansible-keys.yaml; do
	vars=packaging/testdata/${pair%%:*}
	want=packaging/testdata/${pair##*:}
	render_with_ansible "$repo/$vars" "$work/ansible-rendered.yaml" || { cat "$work/ansible.out"; fail "ansible could not render $vars"; }
	diff -u "$want" "$work/ansible-rendered.yaml" || fail "ansible's rendering differs from $want"
	ok "ansible: $vars -> $want"
done
printf '{"monky_deployd_env_id":"env-dev-01","monky_deployd_tenancy_url":"https://t.example","monky_deployd_bao_addr":"https://b.example","monky_deployd_bao_namespace":"a\\nb"}' >"$work/bad-vars.json"
if render_with_ansible "$work/bad-vars.json" "$work/bad.yaml" || [ -e "$work/bad.yaml" ]; then
	fail "the role rendered a value with a newline"
fi
if ! grep -q 'Check the required variables' "$work/ansible.out" || ! grep -q 'evaluated_to.: false' "$work/ansible.out"; then
	cat "$work/ansible.out"
	fail "the role's variable check did not refuse a value with a newline"
fi
ok "the role refuses a value with a newline before rendering"
printf '{"monky_deployd_env_id":"env-dev-01","monky_deployd_tenancy_url":"https://t.example","monky_deployd_bao_addr":"https://b.example","monky_deployd_trusted_keys":["/etc/monky/renderer.pub"]}' >"$work/bad-vars.json"
if render_with_ansible "$work/bad-vars.json" "$work/bad.yaml" || [ -e "$work/bad.yaml" ]; then
	fail "the role rendered a trusted key that is a path"
fi
grep -q 'monky_deployd_trusted_keys must be a list of ed25519 public keys' "$work/ansible.out" ||
	{ cat "$work/ansible.out"; fail "the role's variable check did not refuse a trusted key that is a path"; }
ok "the role refuses a monky_deployd_trusted_keys item that is not an ed25519 public key"
mkdir -p "$work/choose-unit"
ansible-playbook -i localhost, packaging/ansible/tests/choose-unit.yml -e "dir=$work/choose-unit" >"$work/ansible.out" 2>&1 ||
	{ cat "$work/ansible.out"; fail "the role's choice of unit (packaging/ansible/tests/choose-unit.yml)"; }
ok "the role chooses monky-deployd-loop.service for sdk, monky-deployd.timer for proxy and system, from the config on the box"

# --- the .deb -------------------------------------------------------------------------
step "build the .deb"
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' deployd/version.go)
[ -n "$version" ] || fail "no 'const Version = \"…\"' in deployd/version.go (deployd.Version)"
bash packaging/build-deb.sh "$version" "$work/out" ./cmd/monky-deployd
deb=$(ls "$work"/out/monky-deployd_"$version"_*.deb)
ok "$deb"

step "the .deb's contents and modes"
pkgroot=$work/pkgroot
dpkg-deb -x "$deb" "$pkgroot"
dpkg-deb -e "$deb" "$pkgroot/DEBIAN"
expect() { # PATH TYPE MODE
	local p=$pkgroot/$1 got
	[ -e "$p" ] || fail "missing in the .deb: /$1"
	got="$(stat -c '%F %a %U:%G' "$p")"
	[ "$got" = "$2 $3 root:root" ] || fail "/$1 is '$got', want '$2 $3 root:root'"
	ok "/$1 $2 $3"
}
expect usr/bin/monky-deployd "regular file" 755
expect lib/systemd/system/monky-deployd.service "regular file" 644
expect lib/systemd/system/monky-deployd.timer "regular file" 644
expect lib/systemd/system/monky-deployd-loop.service "regular file" 644
expect lib/systemd/system/monky-deployd-hold.path "regular file" 644
bins=$(cd "$pkgroot" && find usr/bin -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')
[ "$bins" = "usr/bin/monky-deployd " ] || fail "the .deb's /usr/bin must hold monky-deployd alone, holds: $bins"
ok "one binary: /usr/bin/monky-deployd"
expect etc/monky-deployd directory 750
expect etc/monky-deployd/config.yaml.example "regular file" 644
expect var/lib/monky-deployd directory 700
expect usr/share/doc/monky-deployd/copyright "regular file" 644
expect usr/share/doc/monky-deployd/changelog.gz "regular file" 644
for s in postinst prerm postrm; do expect "DEBIAN/$s" "regular file" 755; done
[ ! -e "$pkgroot/etc/monky-deployd/config.yaml" ] || fail "the .deb must not ship a real config"
[ ! -e "$pkgroot/etc/monky-deployd/bootstrap.jwt" ] || fail "the .deb must not ship a grant"
ok "no config.yaml, no grant shipped"
for u in monky-deployd.service monky-deployd.timer monky-deployd-loop.service monky-deployd-hold.path; do
	cmp -s "packaging/systemd/$u" "$pkgroot/lib/systemd/system/$u" || fail "$u differs from packaging/systemd"
done
ok "the four units are those of packaging/systemd"
[ "$(cat "$pkgroot/DEBIAN/conffiles")" = /etc/monky-deployd/config.yaml.example ] || fail "conffiles must list the example config only"
ok "conffiles"
[ "$(dpkg-deb -f "$deb" Package)" = monky-deployd ] || fail "Package field"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version field"
dpkg-deb -f "$deb" Depends | grep -q 'docker-ce | docker.io' || fail "Depends must name docker"
# Compose v2 is a Recommends: Debian 12 has no package of it (docs/OPERATIONS.md,
# "Docker compose v2"); the agent refuses to run without it (COMPOSE_MISSING).
dpkg-deb -f "$deb" Depends | grep -q 'compose' && fail "Depends must not name docker compose (Debian 12 has none)"
dpkg-deb -f "$deb" Recommends | grep -qx 'docker-compose-plugin | docker-compose-v2 | docker-compose (>= 2)' || fail "Recommends must name docker compose v2"
ok "control: monky-deployd $version, Depends: $(dpkg-deb -f "$deb" Depends), Recommends: $(dpkg-deb -f "$deb" Recommends)"
(cd "$pkgroot" && md5sum --quiet -c DEBIAN/md5sums) || fail "md5sums"
ok "md5sums"
file_out=$(od -An -c -N4 "$pkgroot/usr/bin/monky-deployd" | tr -d ' ')
[ "$file_out" = '177ELF' ] || fail "usr/bin/monky-deployd is not an ELF binary"
ok "usr/bin/monky-deployd is an ELF binary"
got_version=$("$pkgroot/usr/bin/monky-deployd" version)
# The commit is build-deb.sh's stamp (-X main.commit): 12 hex digits, not "unknown".
[[ $got_version =~ ^monky-deployd\ ${version//./\\.}\ \(commit\ [0-9a-f]{12}\)$ ]] || fail "'monky-deployd version' printed '$got_version'"
ok "monky-deployd version: $got_version"

step "maintainer scripts (in a DPKG_ROOT scratch root, systemd helpers replaced by recorders)"
mroot=$work/mroot
fakebin=$work/fakebin
calls=$work/systemd-calls
mkdir -p "$mroot/run/systemd/system" "$fakebin"
for c in systemctl deb-systemd-invoke chgrp; do
	printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 0\n' "$c" "$calls" >"$fakebin/$c"
	chmod 0755 "$fakebin/$c"
done
# groupadd as a recorder that adds the group to the scratch root's /etc/group (its
# --prefix), as the real one would.
# shellcheck disable=SC2016 # $1 and $2 are the fake's own arguments
printf '#!/bin/sh\necho "groupadd $*" >>"%s"\n[ "$1" = --prefix ] && echo "monky-hold:x:4242:" >>"$2/etc/group"\nexit 0\n' "$calls" >"$fakebin/groupadd"
chmod 0755 "$fakebin/groupadd"
mkdir -p "$mroot/etc"
: >"$mroot/etc/group"
# fake_helper CASES: deb-systemd-helper as a recorder that answers its queries as the
# real one would on the box described by CASES (sh case arms on "$*"); anything else
# exits 0. The default box is a first install: no unit is debian-installed yet, and
# was-enabled is true (deb-systemd-helper's default for a unit it never saw).
fake_helper() {
	printf '#!/bin/sh\necho "deb-systemd-helper $*" >>"%s"\ncase "$*" in\n%s\nesac\nexit 0\n' "$calls" "$1" >"$fakebin/deb-systemd-helper"
	chmod 0755 "$fakebin/deb-systemd-helper"
}
first_install='*debian-installed*) exit 1 ;;'
fake_helper "$first_install"
maint() { DPKG_ROOT=$mroot PATH="$fakebin:$PATH" sh "$pkgroot/DEBIAN/$1" "$2" 2>"$work/$1.err"; }
called() { grep -qxF "$1" "$calls" || { cat "$calls"; fail "maintainer script did not run: $1"; }; }
: >"$calls"
maint postinst configure
for d in etc/monky-deployd:750 var/lib/monky-deployd:700 var/lib/monky-deployd/docker:700 srv/monky:755; do
	[ "$(stat -c '%a' "$mroot/${d%%:*}")" = "${d##*:}" ] || fail "postinst: /${d%%:*} is not mode ${d##*:}"
done
ok "postinst configure: /etc/monky-deployd 0750, /var/lib/monky-deployd 0700, its docker/ 0700, /srv/monky 0755"
called "groupadd --prefix $mroot --system monky-hold"
called "chgrp 4242 $mroot/var/lib/monky-deployd-hold"
[ "$(stat -c '%a' "$mroot/var/lib/monky-deployd-hold")" = 2770 ] || fail "postinst: /var/lib/monky-deployd-hold is not mode 2770"
: >"$calls"
maint postinst configure
if grep -q '^groupadd' "$calls"; then
	cat "$calls"
	fail "postinst added group monky-hold a second time"
fi
ok "postinst configure: group monky-hold (once), /var/lib/monky-deployd-hold 2770 root:monky-hold"
called "deb-systemd-helper enable monky-deployd.timer"
called "deb-systemd-helper update-state monky-deployd-loop.service"
called "systemctl --system daemon-reload"
if grep -Eq 'start|restart' "$calls"; then
	cat "$calls"
	fail "postinst started the timer without a config"
fi
if grep -q 'enable monky-deployd-loop.service' "$calls"; then
	cat "$calls"
	fail "postinst enabled the loop service (only install.sh and the role choose it)"
fi
ok "postinst: timer enabled, the loop service recorded but not enabled, daemon-reload, nothing started without a config"
grep -q 'docker compose v2 is not installed' "$work/postinst.err" || fail "postinst did not note a missing compose v2"
mkdir -p "$mroot/usr/libexec/docker/cli-plugins"
install -m 0755 /dev/null "$mroot/usr/libexec/docker/cli-plugins/docker-compose"
maint postinst configure
if grep -q 'compose' "$work/postinst.err"; then
	fail "postinst noted a missing compose v2 that is installed"
fi
rm -rf "$mroot/usr/libexec"
ok "postinst notes a missing docker compose v2, and only then"
: >"$calls"
printf "env_id: 'env-dev-01'\n" >"$mroot/etc/monky-deployd/config.yaml"
maint postinst configure
called "deb-systemd-invoke restart monky-deployd.timer"
called "deb-systemd-invoke restart monky-deployd-loop.service"
ok "postinst with a config: timer and loop service restarted (deb-systemd-invoke skips the disabled one)"
# An upgrade of an sdk box: both units are debian-installed, the loop service's links
# exist (install.sh enabled it) and the timer's do not (install.sh disabled it), so
# was-enabled is true for the loop service only.
: >"$calls"
fake_helper '*was-enabled*monky-deployd-loop.service) exit 0 ;;
*was-enabled*) exit 1 ;;'
maint postinst configure
called "deb-systemd-helper enable monky-deployd-loop.service"
called "deb-systemd-helper update-state monky-deployd.timer"
if grep -q 'enable monky-deployd.timer' "$calls"; then
	cat "$calls"
	fail "postinst re-enabled a timer that install.sh disabled"
fi
ok "postinst on an sdk box: the loop service kept enabled, the disabled timer left disabled"
fake_helper "$first_install"
: >"$calls"
maint prerm remove
called "deb-systemd-invoke stop monky-deployd.timer monky-deployd-hold.path monky-deployd.service monky-deployd-loop.service"
maint postrm remove
called "deb-systemd-helper mask monky-deployd.timer"
called "deb-systemd-helper mask monky-deployd-loop.service"
[ -f "$mroot/etc/monky-deployd/config.yaml" ] || fail "postrm remove deleted the config"
ok "prerm/postrm remove: timer, service and loop service stopped, timer and loop service masked, config kept"
mkdir -p "$mroot/srv/monky/releases/x" "$mroot/etc/systemd/system/monky-deployd.service.d" "$mroot/etc/systemd/system/monky-deployd-loop.service.d"
touch "$mroot/etc/systemd/system/monky-deployd.service.d/deploy-dir.conf" "$mroot/etc/systemd/system/monky-deployd-loop.service.d/deploy-dir.conf"
maint postrm purge
called "deb-systemd-helper purge monky-deployd.timer"
called "deb-systemd-helper purge monky-deployd-loop.service"
for gone in etc/monky-deployd var/lib/monky-deployd var/lib/monky-deployd-hold etc/systemd/system/monky-deployd.service.d etc/systemd/system/monky-deployd-loop.service.d; do
	[ ! -e "$mroot/$gone" ] || fail "postrm purge left /$gone"
done
[ -d "$mroot/srv/monky/releases/x" ] || fail "postrm purge touched the deploy dir"
ok "postrm purge: state, config and both drop-ins gone, deploy dir kept"

step "lintian"
# Overrides, each with its reason, are in packaging/debian/lintian-overrides.
lintian --fail-on error,warning --tag-display-limit 0 "$deb" 2> >(grep -v 'running with root privileges' >&2) || fail "lintian"
ok "lintian: no errors or warnings beyond the documented overrides"

# --- systemd units --------------------------------------------------------------------
step "systemd-analyze verify"
# verify needs ExecStart's binary at its path and the standard targets: check in a
# scratch root holding a copy of this machine's units, ours and the packaged binary.
units=(monky-deployd.service monky-deployd.timer monky-deployd-loop.service monky-deployd-hold.path)
unitroot=$work/unitroot
mkdir -p "$unitroot/lib/systemd/system" "$unitroot/usr/bin"
cp -a /lib/systemd/system/. "$unitroot/lib/systemd/system/"
for u in "${units[@]}"; do cp "packaging/systemd/$u" "$unitroot/lib/systemd/system/"; done
cp "$pkgroot/usr/bin/monky-deployd" "$unitroot/usr/bin/"
verify_units() {
	if ! systemd-analyze verify --man=no --root="$unitroot" \
		"${units[@]/#//lib/systemd/system/}" >"$work/verify.out" 2>&1; then
		cat "$work/verify.out"
		fail "systemd-analyze verify $*"
	fi
	# verify exits 0 on a value it ignores with a warning: any output is a failure too.
	if [ -s "$work/verify.out" ]; then
		cat "$work/verify.out"
		fail "systemd-analyze verify printed warnings $*"
	fi
}
verify_units
ok "${units[*]}"
svc=packaging/systemd/monky-deployd.service
loop=packaging/systemd/monky-deployd-loop.service
metrics=/var/lib/prometheus/node-exporter/monky-deployd.prom
grep -qx 'SuccessExitStatus=75' $svc || fail "SuccessExitStatus=75"
grep -qx 'Type=oneshot' $svc || fail "Type=oneshot"
grep -qx "ExecStart=/usr/bin/monky-deployd run --config /etc/monky-deployd/config.yaml --metrics-file $metrics" $svc ||
	fail "ExecStart= of $svc must run /usr/bin/monky-deployd run --config … --metrics-file …"
grep -q '^RandomizedDelaySec=' packaging/systemd/monky-deployd.timer || fail "RandomizedDelaySec"
ok "monky-deployd.service: Type=oneshot, ExecStart=/usr/bin/monky-deployd run, SuccessExitStatus=75; the timer: RandomizedDelaySec"
grep -qx "ExecStart=/usr/bin/monky-deployd run --loop --config /etc/monky-deployd/config.yaml --metrics-file $metrics" $loop ||
	fail "ExecStart= of $loop must run /usr/bin/monky-deployd run --loop --config … --metrics-file …"
for want in Type=exec Restart=on-failure RestartPreventExitStatus=78 KillMode=mixed \
	ConditionPathExists=/etc/monky-deployd/config.yaml 'Conflicts=monky-deployd.timer monky-deployd.service' WantedBy=multi-user.target; do
	grep -qxF "$want" $loop || fail "$loop has no $want"
done
grep -q '^SuccessExitStatus=' $loop && fail "$loop must not have SuccessExitStatus= (the loop backs off on 75 itself)"
ok "monky-deployd-loop.service: ExecStart=… run --loop, Type=exec, Restart=on-failure, RestartPreventExitStatus=78, Conflicts= the timer and its service"
# The packaged binary takes each unit's command line: with a config that does not exist
# it must fail on the config (exit 1, CONFIG_INVALID), not on a flag (exit 2, usage).
for u in $svc $loop; do
	cmdline=$(sed -n 's/^ExecStart=//p' "$u")
	cmdline=${cmdline//\/etc\/monky-deployd\/config.yaml/$work\/no-such-config.yaml}
	cmdline=${cmdline//$metrics/$work\/unit.prom}
	read -r -a argv <<<"$cmdline"
	[ "${argv[0]}" = /usr/bin/monky-deployd ] || fail "$u runs ${argv[0]}"
	rc=0
	"$pkgroot${argv[0]}" "${argv[@]:1}" >"$work/cmdline.out" 2>&1 || rc=$?
	{ [ "$rc" = 1 ] && grep -q 'no-such-config.yaml' "$work/cmdline.out"; } ||
		{ cat "$work/cmdline.out"; fail "the packaged monky-deployd does not take the command line of $u (exit $rc)"; }
	ok "the packaged binary takes $(basename "$u")'s command line (a missing config: exit 1, not a usage error)"
done

step "systemd-analyze security"
max_exposure=2.0
for u in monky-deployd.service monky-deployd-loop.service; do
	exposure=$(systemd-analyze security --offline=yes --root="$unitroot" "$u" 2>/dev/null |
		sed -n "s/.*Overall exposure level for $u: \([0-9.]*\).*/\1/p")
	[ -n "$exposure" ] || fail "no exposure level from systemd-analyze security $u"
	awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }' || fail "$u: exposure $exposure is above $max_exposure"
	ok "$u: exposure level $exposure (at most $max_exposure)"
done

# --- install.sh -----------------------------------------------------------------------
step "install.sh --root, twice"
grant=$work/grant.jwt
printf 'eyJhbGciOiJSUzI1NiJ9.check-sh-planted-grant.sig' >"$grant"
inst=$work/inst
args=(--root "$inst" --deb "$deb" --env-id env-dev-01 --tenancy-url https://tenancy.monky.internal
	--bao-addr https://bao.monky.internal:8200 --deploy-dir /data/monky --min-free-mb 2048
	--bao-namespace ops/team-a --tenancy-service "monky's tenancy" --health-timeout 5m --keep-releases 3
	--allow-privileged cadvisor --allow-privileged node-exporter --grant "$grant")
bash packaging/install.sh --dry-run "${args[@]}" >"$work/dry.out"
[ ! -e "$inst" ] || fail "--dry-run created $inst"
ok "--dry-run changes nothing"
bash packaging/install.sh "${args[@]}" >"$work/first.out" || { cat "$work/first.out"; fail "install.sh first run"; }
cat "$work/first.out"
snapshot() { (cd "$inst" && find . -printf '%p %y %m %s %T@\n' | LC_ALL=C sort); }
snapshot >"$work/before"
bash packaging/install.sh "${args[@]}" >"$work/second.out" || { cat "$work/second.out"; fail "install.sh second run"; }
cat "$work/second.out"
grep -q 'done: nothing changed' "$work/second.out" || fail "second run reported changes"
snapshot >"$work/after"
diff -u "$work/before" "$work/after" || fail "second run changed files"
ok "second run changed nothing"
diff -u packaging/testdata/config.install.yaml "$inst/etc/monky-deployd/config.yaml" ||
	fail "install.sh config differs from packaging/testdata/config.install.yaml"
ok "config equals packaging/testdata/config.install.yaml (parsed by the Go test below)"
[ "$(stat -c '%a' "$inst/etc/monky-deployd/config.yaml")" = 640 ] || fail "config mode"
[ "$(stat -c '%a' "$inst/etc/monky-deployd/bootstrap.jwt")" = 600 ] || fail "grant mode"
cmp -s "$grant" "$inst/etc/monky-deployd/bootstrap.jwt" || fail "grant content"
ok "config 0640, grant 0600 with the given content"
# The packaged agent itself reads the config (status needs no network and no state).
for cfg in "$inst/etc/monky-deployd/config.yaml" packaging/testdata/config.ansible.yaml packaging/testdata/config.ansible-proxy.yaml \
	packaging/testdata/config.install-keys.yaml packaging/testdata/config.ansible-keys.yaml; do
	# A fresh box has no token yet: status says it is critical (exit 2); a config it
	# cannot read is an unknown status (exit 3).
	rc=0
	"$pkgroot/usr/bin/monky-deployd" status --config "$cfg" >"$work/status.out" 2>&1 || rc=$?
	[ "$rc" -le 2 ] || { cat "$work/status.out"; fail "monky-deployd status rejects $cfg (exit $rc)"; }
	grep -Eq '^env: +env-(dev-01|prod-03)$' "$work/status.out" || { cat "$work/status.out"; fail "monky-deployd status did not show the env of $cfg"; }
done
ok "the packaged monky-deployd accepts the configs of install.sh and the ansible template (status --config)"
grep -qx 'signatures: *required, trusted keys 21fe31dfa154a261, 34750f98bd59fcfc' "$work/status.out" || { cat "$work/status.out"; fail "monky-deployd status does not show the trusted keys of config.ansible-keys.yaml"; }
ok "monky-deployd status shows the trusted keys of the keys configs"
if grep -rq 'check-sh-planted-grant' "$work/first.out" "$work/second.out" "$work/dry.out"; then
	fail "install.sh printed the grant"
fi
ok "the grant is never printed"
for d in monky-deployd.service.d monky-deployd-loop.service.d; do
	grep -qx 'ReadWritePaths=/data/monky' "$inst/etc/systemd/system/$d/deploy-dir.conf" || fail "deploy-dir drop-in in $d"
done
[ "$(stat -c '%a' "$inst/var/lib/monky-deployd")" = 700 ] || fail "state dir mode"
[ -d "$inst/data/monky" ] || fail "deploy dir"
ok "drop-ins for /data/monky (monky-deployd.service and monky-deployd-loop.service), state dir 0700, deploy dir created"
[ "$(stat -c '%F %a' "$inst/usr/bin/monky-deployd")" = "regular file 755" ] || fail "install.sh: /usr/bin/monky-deployd is not a 0755 file"
cmp -s "$pkgroot/usr/bin/monky-deployd" "$inst/usr/bin/monky-deployd" || fail "install.sh: /usr/bin/monky-deployd is not the packaged one"
bins=$(cd "$inst" && find usr/bin -mindepth 1 | tr '\n' ' ')
[ "$bins" = "usr/bin/monky-deployd " ] || fail "install.sh: /usr/bin holds $bins"
grep -qx 'install.sh: binary: /usr/bin/monky-deployd (the units run it)' "$work/first.out" || fail "install.sh did not check the binary"
ok "install.sh: /usr/bin/monky-deployd alone, 0755, the packaged one"
# The args give no --transport: sdk, the default, which the loop service serves.
grep -qx 'install.sh: units: monky-deployd-loop.service for transport sdk; not enabled (--root: no systemctl in a scratch root)' "$work/first.out" ||
	fail "install.sh did not choose monky-deployd-loop.service for transport sdk"
ok "install.sh: transport sdk -> monky-deployd-loop.service"
mkdir -p "$unitroot/etc/systemd/system"
cp -a "$inst/etc/systemd/system/monky-deployd.service.d" "$inst/etc/systemd/system/monky-deployd-loop.service.d" "$unitroot/etc/systemd/system/"
verify_units "(with install.sh's deploy-dir drop-ins)"
rm -rf "$unitroot/etc/systemd/system/monky-deployd.service.d" "$unitroot/etc/systemd/system/monky-deployd-loop.service.d"
ok "systemd-analyze verify with install.sh's drop-ins"

step "install.sh: --trusted-key and --trusted-key-file write trusted_keys"
printf 'ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n' >"$work/renderer-2.pub"
bash packaging/install.sh --root "$work/keys" --skip-package --env-id env-dev-01 --tenancy-url https://tenancy.monky.internal \
	--bao-addr https://bao.monky.internal:8200 --transport system \
	--trusted-key ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w= --trusted-key-file "$work/renderer-2.pub" >"$work/keys.out" ||
	{ cat "$work/keys.out"; fail "install.sh --trusted-key"; }
diff -u packaging/testdata/config.install-keys.yaml "$work/keys/etc/monky-deployd/config.yaml" ||
	fail "install.sh config with keys differs from packaging/testdata/config.install-keys.yaml"
for bad in ed25519:AAAA "$work/renderer-2.pub"; do
	if bash packaging/install.sh --root "$work/badkey" --skip-package --env-id env-dev-01 --tenancy-url https://t.example \
		--bao-addr https://b.example --trusted-key "$bad" >/dev/null 2>"$work/badkey.err"; then
		fail "install.sh accepted --trusted-key $bad"
	fi
	grep -q '^install.sh: --trusted-key ' "$work/badkey.err" || { cat "$work/badkey.err"; fail "install.sh did not name --trusted-key"; }
	[ ! -e "$work/badkey" ] || fail "install.sh wrote $work/badkey before refusing --trusted-key"
done
ok "config equals packaging/testdata/config.install-keys.yaml; a malformed key or a path is refused, naming --trusted-key"

step "install.sh: grant from stdin, an existing config is kept, --force-config replaces it"
printf 'stdin-grant' | bash packaging/install.sh --root "$inst" --deb "$deb" --grant - --env-id env-dev-02 >"$work/third.out"
cmp -s <(printf 'stdin-grant') "$inst/etc/monky-deployd/bootstrap.jwt" || fail "grant from stdin"
grep -q "^env_id: 'env-dev-01'$" "$inst/etc/monky-deployd/config.yaml" || fail "config was not kept"
bash packaging/install.sh --root "$inst" --skip-package --force-config --env-id env-dev-02 \
	--tenancy-url https://tenancy.monky.internal --bao-addr https://bao.monky.internal:8200 >/dev/null
grep -q "^env_id: 'env-dev-02'$" "$inst/etc/monky-deployd/config.yaml" || fail "--force-config did not replace the config"
for d in monky-deployd.service.d monky-deployd-loop.service.d; do
	[ ! -e "$inst/etc/systemd/system/$d/deploy-dir.conf" ] || fail "drop-in in $d not removed for the default deploy dir"
done
ok "stdin grant, config kept, --force-config, drop-ins removed"

step "install.sh: the unit follows the config's tenancy.transport"
# unit_of ARGS...: the unit a run of install.sh --root chose.
unit_of() {
	bash packaging/install.sh --root "$inst" --skip-package "$@" >"$work/unit.out" 2>&1 || { cat "$work/unit.out"; fail "install.sh $*"; }
	sed -n 's/^install.sh: units: \([a-z.-]*\) for transport \([a-z]*\);.*/\1 \2/p' "$work/unit.out"
}
new=(--force-config --env-id env-dev-02 --tenancy-url https://tenancy.monky.internal --bao-addr https://bao.monky.internal:8200)
[ "$(unit_of "${new[@]}" --transport system)" = "monky-deployd.timer system" ] || fail "--transport system did not choose the timer"
[ "$(unit_of "${new[@]}" --transport proxy --proxy http://127.0.0.1:8080)" = "monky-deployd.timer proxy" ] || fail "--transport proxy did not choose the timer"
# A kept config decides, not the --transport default nor a --transport given without
# --force-config (which the kit says).
[ "$(unit_of)" = "monky-deployd.timer proxy" ] || fail "a kept proxy config did not keep the timer"
[ "$(unit_of --transport sdk)" = "monky-deployd.timer proxy" ] || fail "--transport sdk without --force-config changed the unit of a kept proxy config"
grep -qx 'install.sh: note: --transport sdk ignored: the kept config says proxy, and it decides (--force-config rewrites it)' "$work/unit.out" ||
	{ cat "$work/unit.out"; fail "install.sh did not say it ignored --transport"; }
[ "$(unit_of "${new[@]}" --transport sdk)" = "monky-deployd-loop.service sdk" ] || fail "--transport sdk did not choose the loop service"
[ "$(unit_of)" = "monky-deployd-loop.service sdk" ] || fail "a kept sdk config did not keep the loop service"
# Configs written by hand: quoted or not, commented, or without the key (sdk, the default).
hand=$inst/etc/monky-deployd/config.yaml
for c in "system|tenancy:\n  url: https://t\n  transport: system   # by hand\n" \
	"proxy|env_id: env-dev-01\ntenancy:\n  transport: \"proxy\"\nbao:\n  addr: https://b\n" \
	"sdk|env_id: env-dev-01\ntenancy:\n  url: https://t\ncompose:\n  transport: system\n"; do
	# shellcheck disable=SC2059 # the samples are printf formats
	printf "${c#*|}" >"$hand"
	got=$(unit_of)
	[ "$got" = "$(if [ "${c%%|*}" = sdk ]; then echo monky-deployd-loop.service; else echo monky-deployd.timer; fi) ${c%%|*}" ] ||
		fail "a config with transport ${c%%|*} by hand chose '$got'"
done
printf 'tenancy: {transport: proxy}\n' >"$hand"
if bash packaging/install.sh --root "$inst" --skip-package >"$work/unit.out" 2>&1; then
	cat "$work/unit.out"
	fail "install.sh guessed the transport of a flow-style tenancy mapping"
fi
grep -q 'cannot read tenancy.transport' "$work/unit.out" || { cat "$work/unit.out"; fail "install.sh did not say why it stopped"; }
ok "sdk -> monky-deployd-loop.service, proxy and system -> monky-deployd.timer; a kept config's transport decides; by-hand configs read; flow style refused"
bash packaging/install.sh --root "$inst" --skip-package "${new[@]}" >/dev/null
if bash packaging/install.sh --root "$work/bad" --skip-package --env-id env-dev-1 >/dev/null 2>&1; then
	fail "install.sh accepted a bad env_id"
fi
ok "a bad env_id is refused"
rm "$inst/usr/bin/monky-deployd"
if bash packaging/install.sh --root "$inst" --skip-package >"$work/nobin.out" 2>&1; then
	cat "$work/nobin.out"
	fail "install.sh accepted a box whose units run a missing /usr/bin/monky-deployd"
fi
grep -q '/usr/bin/monky-deployd is missing or not executable' "$work/nobin.out" || { cat "$work/nobin.out"; fail "install.sh did not name the missing binary"; }
ok "a box whose units run a missing /usr/bin/monky-deployd is refused"

# --- Go tests of packaging/ -----------------------------------------------------------
step "go test ./packaging/ (configs parse with the agent's parser; one version)"
go test -count=1 ./packaging/
ok "go test ./packaging/"

printf '\npackaging: all checks passed\n'
