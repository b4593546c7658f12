#!/usr/bin/env bash
# check.sh — every packaging check, the one script CI calls (bash packaging/check.sh).
#
# Installs what it needs with apt (one apt-get update), then: bash -n and shellcheck on
# every *.sh of the repo and the maintainer scripts; the ansible template re-rendered and
# diffed against packaging/testdata; the .deb built, unpacked and checked file by file
# (both binaries; the tick hands over to the agent next to it), lintian on it;
# systemd-analyze verify and security on the units; install.sh --root run
# twice (idempotent) with its config diffed against packaging/testdata; the Go tests of
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
for pair in ansible-vars.json:config.ansible.yaml ansible-vars-proxy.json:config.ansible-proxy.yaml; do
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
for pair in ansible-vars.json:config.ansible.yaml ansible-vars-proxy.json:config.ansible-proxy.yaml; do
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

# --- the .deb -------------------------------------------------------------------------
step "build the .deb"
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/contract/contract.go)
[ -n "$version" ] || fail "no Version in internal/contract/contract.go (deployd.Version)"
bash packaging/build-deb.sh "$version" "$work/out" ./cmd/monky-deployd ./cmd/monky-deployd-tick
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
expect usr/bin/monky-deployd-tick "regular file" 755
expect lib/systemd/system/monky-deployd.service "regular file" 644
expect lib/systemd/system/monky-deployd.timer "regular file" 644
expect etc/monky-deployd directory 750
expect etc/monky-deployd/config.yaml.example "regular file" 644
expect var/lib/monky-deployd directory 700
expect usr/share/doc/monky-deployd/copyright "regular file" 644
expect usr/share/doc/monky-deployd/changelog.gz "regular file" 644
for s in postinst prerm postrm; do expect "DEBIAN/$s" "regular file" 755; done
[ ! -e "$pkgroot/etc/monky-deployd/config.yaml" ] || fail "the .deb must not ship a real config"
[ ! -e "$pkgroot/etc/monky-deployd/bootstrap.jwt" ] || fail "the .deb must not ship a grant"
ok "no config.yaml, no grant shipped"
cmp -s packaging/systemd/monky-deployd.service "$pkgroot/lib/systemd/system/monky-deployd.service" || fail "service unit differs from packaging/systemd"
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
for bin in monky-deployd monky-deployd-tick; do
	file_out=$(od -An -c -N4 "$pkgroot/usr/bin/$bin" | tr -d ' ')
	[ "$file_out" = '177ELF' ] || fail "usr/bin/$bin is not an ELF binary"
	ok "usr/bin/$bin is an ELF binary"
done
got_version=$("$pkgroot/usr/bin/monky-deployd" version)
# The commit is build-deb.sh's stamp (-X main.commit): 12 hex digits, not "unknown".
[[ $got_version =~ ^monky-deployd\ ${version//./\\.}\ \(commit\ [0-9a-f]{12}\)$ ]] || fail "'monky-deployd version' printed '$got_version'"
ok "monky-deployd version: $got_version"
# The tick hands every command but an idle `run` to monky-deployd in its own directory,
# by exec: `monky-deployd-tick version` is the packaged agent's answer.
tick_version=$("$pkgroot/usr/bin/monky-deployd-tick" version) || fail "'monky-deployd-tick version' failed"
[ "$tick_version" = "$got_version" ] || fail "'monky-deployd-tick version' printed '$tick_version', not the agent's '$got_version'"
ok "monky-deployd-tick hands over to the monky-deployd next to it: $tick_version"
# Alone in a directory it cannot hand over: exit 1, with a line that says why.
mkdir -p "$work/tick-alone"
cp "$pkgroot/usr/bin/monky-deployd-tick" "$work/tick-alone/"
rc=0
"$work/tick-alone/monky-deployd-tick" version >"$work/tick-alone.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$work/tick-alone.out"; fail "monky-deployd-tick without monky-deployd next to it exited $rc, want 1"; }
grep -q 'could not hand the tick to the full agent' "$work/tick-alone.out" || { cat "$work/tick-alone.out"; fail "monky-deployd-tick alone did not say why it failed"; }
ok "monky-deployd-tick without monky-deployd next to it: exit 1, says why"

step "maintainer scripts (in a DPKG_ROOT scratch root, systemd helpers replaced by recorders)"
mroot=$work/mroot
fakebin=$work/fakebin
calls=$work/systemd-calls
mkdir -p "$mroot/run/systemd/system" "$fakebin"
for c in systemctl deb-systemd-helper deb-systemd-invoke; do
	printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 0\n' "$c" "$calls" >"$fakebin/$c"
	chmod 0755 "$fakebin/$c"
done
maint() { DPKG_ROOT=$mroot PATH="$fakebin:$PATH" sh "$pkgroot/DEBIAN/$1" "$2" 2>"$work/$1.err"; }
called() { grep -qxF "$1" "$calls" || { cat "$calls"; fail "maintainer script did not run: $1"; }; }
: >"$calls"
maint postinst configure
for d in etc/monky-deployd:750 var/lib/monky-deployd:700 var/lib/monky-deployd/docker:700 srv/monky:755; do
	[ "$(stat -c '%a' "$mroot/${d%%:*}")" = "${d##*:}" ] || fail "postinst: /${d%%:*} is not mode ${d##*:}"
done
ok "postinst configure: /etc/monky-deployd 0750, /var/lib/monky-deployd 0700, its docker/ 0700, /srv/monky 0755"
called "deb-systemd-helper enable monky-deployd.timer"
called "systemctl --system daemon-reload"
if grep -Eq 'start|restart' "$calls"; then
	cat "$calls"
	fail "postinst started the timer without a config"
fi
ok "postinst: timer enabled, daemon-reload, nothing started without a config"
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
ok "postinst with a config: timer (re)started"
: >"$calls"
maint prerm remove
called "deb-systemd-invoke stop monky-deployd.timer monky-deployd.service"
maint postrm remove
called "deb-systemd-helper mask monky-deployd.timer"
[ -f "$mroot/etc/monky-deployd/config.yaml" ] || fail "postrm remove deleted the config"
ok "prerm/postrm remove: timer and service stopped, timer masked, config kept"
mkdir -p "$mroot/srv/monky/releases/x" "$mroot/etc/systemd/system/monky-deployd.service.d"
touch "$mroot/etc/systemd/system/monky-deployd.service.d/deploy-dir.conf"
maint postrm purge
called "deb-systemd-helper purge monky-deployd.timer"
for gone in etc/monky-deployd var/lib/monky-deployd etc/systemd/system/monky-deployd.service.d; do
	[ ! -e "$mroot/$gone" ] || fail "postrm purge left /$gone"
done
[ -d "$mroot/srv/monky/releases/x" ] || fail "postrm purge touched the deploy dir"
ok "postrm purge: state, config and drop-in gone, deploy dir kept"

step "lintian"
# Overrides, each with its reason, are in packaging/debian/lintian-overrides.
lintian --fail-on error,warning --tag-display-limit 0 "$deb" 2> >(grep -v 'running with root privileges' >&2) || fail "lintian"
ok "lintian: no errors or warnings beyond the documented overrides"

# --- systemd units --------------------------------------------------------------------
step "systemd-analyze verify"
# verify needs ExecStart's binary at its path and the standard targets: check in a
# scratch root holding a copy of this machine's units, ours and the packaged binaries
# (ExecStart= runs monky-deployd-tick, which execs monky-deployd next to it).
unitroot=$work/unitroot
mkdir -p "$unitroot/lib/systemd/system" "$unitroot/usr/bin"
cp -a /lib/systemd/system/. "$unitroot/lib/systemd/system/"
cp packaging/systemd/monky-deployd.service packaging/systemd/monky-deployd.timer "$unitroot/lib/systemd/system/"
cp "$pkgroot/usr/bin/monky-deployd" "$pkgroot/usr/bin/monky-deployd-tick" "$unitroot/usr/bin/"
verify_units() {
	if ! systemd-analyze verify --man=no --root="$unitroot" \
		/lib/systemd/system/monky-deployd.service /lib/systemd/system/monky-deployd.timer >"$work/verify.out" 2>&1; then
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
ok "monky-deployd.service, monky-deployd.timer"
grep -qx 'SuccessExitStatus=75' packaging/systemd/monky-deployd.service || fail "SuccessExitStatus=75"
grep -qx 'Type=oneshot' packaging/systemd/monky-deployd.service || fail "Type=oneshot"
grep -qx 'ExecStart=/usr/bin/monky-deployd-tick run --config /etc/monky-deployd/config.yaml --metrics-file /var/lib/prometheus/node-exporter/monky-deployd.prom' \
	packaging/systemd/monky-deployd.service || fail "ExecStart= must run /usr/bin/monky-deployd-tick run --config … --metrics-file …"
ok "ExecStart=/usr/bin/monky-deployd-tick run (the agent next to it takes over all but an idle tick)"
grep -q '^RandomizedDelaySec=' packaging/systemd/monky-deployd.timer || fail "RandomizedDelaySec"
ok "Type=oneshot, SuccessExitStatus=75, RandomizedDelaySec"

step "systemd-analyze security"
max_exposure=2.0
exposure=$(systemd-analyze security --offline=yes --root="$unitroot" monky-deployd.service 2>/dev/null |
	sed -n 's/.*Overall exposure level for monky-deployd.service: \([0-9.]*\).*/\1/p')
[ -n "$exposure" ] || fail "no exposure level from systemd-analyze security"
awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }' || fail "exposure $exposure is above $max_exposure"
ok "exposure level $exposure (at most $max_exposure)"

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
for cfg in "$inst/etc/monky-deployd/config.yaml" packaging/testdata/config.ansible.yaml packaging/testdata/config.ansible-proxy.yaml; do
	"$pkgroot/usr/bin/monky-deployd" status --config "$cfg" >"$work/status.out" 2>&1 || { cat "$work/status.out"; fail "monky-deployd status rejects $cfg"; }
	grep -Eq '^env: +env-(dev-01|prod-03)$' "$work/status.out" || { cat "$work/status.out"; fail "monky-deployd status did not show the env of $cfg"; }
done
ok "the packaged monky-deployd accepts the configs of install.sh and the ansible template (status --config)"
if grep -rq 'check-sh-planted-grant' "$work/first.out" "$work/second.out" "$work/dry.out"; then
	fail "install.sh printed the grant"
fi
ok "the grant is never printed"
grep -qx 'ReadWritePaths=/data/monky' "$inst/etc/systemd/system/monky-deployd.service.d/deploy-dir.conf" || fail "deploy-dir drop-in"
[ "$(stat -c '%a' "$inst/var/lib/monky-deployd")" = 700 ] || fail "state dir mode"
[ -d "$inst/data/monky" ] || fail "deploy dir"
ok "drop-in for /data/monky, state dir 0700, deploy dir created"
for bin in monky-deployd monky-deployd-tick; do
	[ "$(stat -c '%F %a' "$inst/usr/bin/$bin")" = "regular file 755" ] || fail "install.sh: /usr/bin/$bin is not a 0755 file"
	cmp -s "$pkgroot/usr/bin/$bin" "$inst/usr/bin/$bin" || fail "install.sh: /usr/bin/$bin is not the packaged one"
done
grep -q 'binaries: /usr/bin/monky-deployd-tick (the timer.s tick) next to /usr/bin/monky-deployd' "$work/first.out" || fail "install.sh did not check the two binaries"
ok "install.sh: /usr/bin/monky-deployd and /usr/bin/monky-deployd-tick side by side, 0755"
mkdir -p "$unitroot/etc/systemd/system"
cp -a "$inst/etc/systemd/system/monky-deployd.service.d" "$unitroot/etc/systemd/system/"
verify_units "(with install.sh's deploy-dir drop-in)"
rm -rf "$unitroot/etc/systemd/system/monky-deployd.service.d"
ok "systemd-analyze verify with install.sh's drop-in"

step "install.sh: grant from stdin, an existing config is kept, --force-config replaces it"
printf 'stdin-grant' | bash packaging/install.sh --root "$inst" --deb "$deb" --grant - --env-id env-dev-02 >"$work/third.out"
cmp -s <(printf 'stdin-grant') "$inst/etc/monky-deployd/bootstrap.jwt" || fail "grant from stdin"
grep -q "^env_id: 'env-dev-01'$" "$inst/etc/monky-deployd/config.yaml" || fail "config was not kept"
bash packaging/install.sh --root "$inst" --skip-package --force-config --env-id env-dev-02 \
	--tenancy-url https://tenancy.monky.internal --bao-addr https://bao.monky.internal:8200 >/dev/null
grep -q "^env_id: 'env-dev-02'$" "$inst/etc/monky-deployd/config.yaml" || fail "--force-config did not replace the config"
[ ! -e "$inst/etc/systemd/system/monky-deployd.service.d/deploy-dir.conf" ] || fail "drop-in not removed for the default deploy dir"
ok "stdin grant, config kept, --force-config, drop-in removed"
if bash packaging/install.sh --root "$work/bad" --skip-package --env-id env-dev-1 >/dev/null 2>&1; then
	fail "install.sh accepted a bad env_id"
fi
ok "a bad env_id is refused"
rm "$inst/usr/bin/monky-deployd-tick"
if bash packaging/install.sh --root "$inst" --skip-package >"$work/notick.out" 2>&1; then
	cat "$work/notick.out"
	fail "install.sh accepted a box whose unit runs a missing /usr/bin/monky-deployd-tick"
fi
grep -q 'monky-deployd-tick is missing or not executable' "$work/notick.out" || { cat "$work/notick.out"; fail "install.sh did not name the missing tick binary"; }
ok "a box whose unit runs the tick without /usr/bin/monky-deployd-tick is refused"

# --- Go tests of packaging/ -----------------------------------------------------------
step "go test ./packaging/ (configs parse with the agent's parser; one version)"
go test -count=1 ./packaging/
ok "go test ./packaging/"

printf '\npackaging: all checks passed\n'
