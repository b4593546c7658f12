#!/usr/bin/env bash
# install.sh — the monky-deployd install kit.
#
# Installs the package (the one binary /usr/bin/monky-deployd and its units), writes
# /etc/monky-deployd/config.yaml from its arguments, places the deploy grant (mode 0600,
# atomically) and enables the unit that the config's tenancy.transport calls for:
# monky-deployd-loop.service for sdk (one long-running process, one OpenZiti context),
# monky-deployd.timer for proxy and system; the other one is disabled and stopped.
# Idempotent: a second run with the same arguments changes nothing; an existing config
# is kept unless --force-config (and then its transport decides). With --root DIR
# everything goes into a scratch root (the .deb is unpacked there, systemctl is not
# called): that is how CI tests this script.
#
#   install.sh --env-id env-dev-01 --tenancy-url https://tenancy.monky.internal \
#              --bao-addr https://bao.monky.internal:8200 --grant /tmp/grant.jwt
#
# Run with --help for every option; docs/OPERATIONS.md has the walk-through.
set -euo pipefail

DEFAULT_VERSION="0.1.0"

# Defaults of the config keys install.sh can set (SPEC section 4).
DEFAULT_DEPLOY_DIR=/srv/monky
CONFIG_DIR=/etc/monky-deployd
STATE_DIR=/var/lib/monky-deployd
# The two ways of ticking (docs/OPERATIONS.md, "What is on a box"); both services get
# the deploy-dir drop-in, so that a change of transport finds it in place.
TIMER=monky-deployd.timer
LOOP=monky-deployd-loop.service
SERVICES=(monky-deployd.service "$LOOP")
# Holds (docs/OPERATIONS.md, "Holds and windows"): root and the members of this group
# write the hold file, in a directory of its own.
HOLD_GROUP=monky-hold
HOLD_DIR=/var/lib/monky-deployd-hold

usage() {
	cat <<USAGE
usage: install.sh [options]

Package:
  --version V            package version to install from the configured apt repo (default $DEFAULT_VERSION)
  --deb FILE             install this local .deb instead of using apt's repo
  --skip-package         do not install the package (it is already there)

Config (written to $CONFIG_DIR/config.yaml; kept if it exists unless --force-config):
  --env-id ID            env_id, env-<tier>-<nn> (required for a new config)
  --tenancy-url URL      tenancy.url (required for a new config)
  --transport T          tenancy.transport: sdk | proxy | system (default sdk); sdk
                         enables $LOOP, proxy and system $TIMER
  --tenancy-service S    tenancy.service (sdk; default monky-tenancy)
  --identity PATH        tenancy.identity (sdk; default $CONFIG_DIR/identity.json)
  --proxy URL            tenancy.proxy (required with --transport proxy)
  --tenancy-ca-file PATH tenancy.ca_file
  --server-name NAME     tenancy.server_name
  --bao-addr URL         bao.addr (required for a new config)
  --bao-ca-file PATH     bao.ca_file
  --bao-namespace NS     bao.namespace
  --deploy-dir DIR       deploy_dir (default $DEFAULT_DEPLOY_DIR; another dir gets a unit drop-in)
  --compose-project P    compose.project
  --min-free-mb N        min_free_mb
  --health-timeout D     compose.health_timeout (e.g. 5m)
  --keep-releases N      compose.keep_releases
  --allow-privileged S   compose.allow_privileged (repeat for several services)
  --trusted-key KEY      trusted_keys: a renderer's public key, ed25519:<base64>, the text of
                         the .pub of 'monky-deployd keygen' (repeat for several keys); with
                         one, the box runs only bundles signed by a trusted key
  --trusted-key-file F   trusted_keys: the key in the .pub file F (repeatable, with --trusted-key)
  --force-config         replace an existing config

Grant and service:
  --grant FILE           the bootstrap deploy grant; '-' reads it from standard input
  --no-start             enable the unit ($LOOP or $TIMER) but do not start it now
  --hold-user USER       add USER to group $HOLD_GROUP: they may hold the box (repeat for several)
  --root DIR             install into the scratch root DIR (needs --deb or --skip-package; no systemctl)
  --dry-run              print what would change, change nothing
  -h, --help             this text
USAGE
}

die() {
	echo "install.sh: $*" >&2
	exit 1
}
say() { echo "install.sh: $*"; }

version=$DEFAULT_VERSION
deb=""
skip_package=0
env_id=""
tenancy_url=""
transport=sdk
transport_given=0
tenancy_service=""
identity=""
proxy=""
tenancy_ca_file=""
server_name=""
bao_addr=""
bao_ca_file=""
bao_namespace=""
deploy_dir=$DEFAULT_DEPLOY_DIR
compose_project=""
min_free_mb=""
health_timeout=""
keep_releases=""
allow_privileged=()
trusted_keys=()      # in the order given; an item of --trusted-key-file is read below
trusted_key_files=() # per item: the .pub of --trusted-key-file, "" for --trusted-key
force_config=0
grant=""
no_start=0
hold_users=()
root=""
dry_run=0

need_arg() {
	if [ $# -lt 2 ] || [ -z "$2" ]; then
		die "option $1 needs a value"
	fi
}

while [ $# -gt 0 ]; do
	case $1 in
	--version) need_arg "$@"; version=$2; shift 2 ;;
	--deb) need_arg "$@"; deb=$2; shift 2 ;;
	--skip-package) skip_package=1; shift ;;
	--env-id) need_arg "$@"; env_id=$2; shift 2 ;;
	--tenancy-url) need_arg "$@"; tenancy_url=$2; shift 2 ;;
	--transport) need_arg "$@"; transport=$2; transport_given=1; shift 2 ;;
	--tenancy-service) need_arg "$@"; tenancy_service=$2; shift 2 ;;
	--identity) need_arg "$@"; identity=$2; shift 2 ;;
	--proxy) need_arg "$@"; proxy=$2; shift 2 ;;
	--tenancy-ca-file) need_arg "$@"; tenancy_ca_file=$2; shift 2 ;;
	--server-name) need_arg "$@"; server_name=$2; shift 2 ;;
	--bao-addr) need_arg "$@"; bao_addr=$2; shift 2 ;;
	--bao-ca-file) need_arg "$@"; bao_ca_file=$2; shift 2 ;;
	--bao-namespace) need_arg "$@"; bao_namespace=$2; shift 2 ;;
	--deploy-dir) need_arg "$@"; deploy_dir=$2; shift 2 ;;
	--compose-project) need_arg "$@"; compose_project=$2; shift 2 ;;
	--min-free-mb) need_arg "$@"; min_free_mb=$2; shift 2 ;;
	--health-timeout) need_arg "$@"; health_timeout=$2; shift 2 ;;
	--keep-releases) need_arg "$@"; keep_releases=$2; shift 2 ;;
	--allow-privileged) need_arg "$@"; allow_privileged+=("$2"); shift 2 ;;
	--trusted-key) need_arg "$@"; trusted_keys+=("$2"); trusted_key_files+=(""); shift 2 ;;
	--trusted-key-file) need_arg "$@"; trusted_keys+=(""); trusted_key_files+=("$2"); shift 2 ;;
	--force-config) force_config=1; shift ;;
	--hold-user) need_arg "$@"; hold_users+=("$2"); shift 2 ;;
	--grant) need_arg "$@"; grant=$2; shift 2 ;;
	--no-start) no_start=1; shift ;;
	--root) need_arg "$@"; root=$2; shift 2 ;;
	--dry-run) dry_run=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done

# --- validation: every message names the option, never echoes a grant -------------

# check_plain OPTION VALUE: no control characters (a newline would break the YAML line).
check_plain() {
	if [[ $2 =~ [[:cntrl:]] ]]; then
		die "$1 must not contain control characters or newlines"
	fi
}
check_url() {
	check_plain "$1" "$2"
	if ! [[ $2 =~ ^https?://[^[:space:]]+$ ]]; then
		die "$1 must be an http:// or https:// URL"
	fi
}
check_abs_path() {
	check_plain "$1" "$2"
	if ! [[ $2 =~ ^/[^[:space:]]*$ ]]; then
		die "$1 must be an absolute path without spaces"
	fi
}
check_uint() {
	if ! [[ $2 =~ ^[0-9]{1,9}$ ]]; then
		die "$1 must be a non-negative integer"
	fi
}

if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([~+][0-9A-Za-z.~+]+)?$ ]]; then
	die "--version must look like 1.2.3"
fi
if [ -n "$root" ]; then
	check_abs_path --root "$root"
	root=${root%/}
	if [ -z "$deb" ] && [ "$skip_package" = 0 ]; then
		die "--root needs --deb FILE or --skip-package (apt cannot install into a scratch root)"
	fi
fi
if [ -n "$deb" ] && [ ! -f "$deb" ]; then
	die "--deb: no such file: $deb"
fi
[ -z "$env_id" ] || [[ $env_id =~ ^env-[a-z0-9]+-[0-9]{2}$ ]] || die "--env-id must match env-<tier>-<nn>, e.g. env-dev-01"
[ -z "$tenancy_url" ] || check_url --tenancy-url "$tenancy_url"
[ -z "$bao_addr" ] || check_url --bao-addr "$bao_addr"
if [ -n "$proxy" ]; then
	check_plain --proxy "$proxy"
	[[ $proxy =~ ^(https?|socks5h?)://[^[:space:]]+$ ]] || die "--proxy must be an http, https, socks5 or socks5h URL"
fi
case $transport in
sdk | proxy | system) ;;
*) die "--transport must be sdk, proxy or system" ;;
esac
if [ "$transport" = proxy ] && [ -z "$proxy" ]; then
	die "--transport proxy needs --proxy URL"
fi
if [ "$transport" != proxy ] && [ -n "$proxy" ]; then
	die "--proxy is only used with --transport proxy"
fi
if [ "$transport" != sdk ] && { [ -n "$identity" ] || [ -n "$tenancy_service" ]; }; then
	die "--identity and --tenancy-service are only used with --transport sdk"
fi
[ -z "$identity" ] || check_abs_path --identity "$identity"
[ -z "$tenancy_ca_file" ] || check_abs_path --tenancy-ca-file "$tenancy_ca_file"
[ -z "$bao_ca_file" ] || check_abs_path --bao-ca-file "$bao_ca_file"
check_abs_path --deploy-dir "$deploy_dir"
deploy_dir=${deploy_dir%/}
[ -n "$deploy_dir" ] || die "--deploy-dir must not be /"
[ -z "$tenancy_service" ] || check_plain --tenancy-service "$tenancy_service"
[ -z "$server_name" ] || check_plain --server-name "$server_name"
[ -z "$bao_namespace" ] || check_plain --bao-namespace "$bao_namespace"
[ -z "$compose_project" ] || [[ $compose_project =~ ^[a-z0-9][a-z0-9_-]*$ ]] || die "--compose-project must be lowercase letters, digits, '-' and '_'"
[ -z "$min_free_mb" ] || check_uint --min-free-mb "$min_free_mb"
[ -z "$keep_releases" ] || check_uint --keep-releases "$keep_releases"
if [ -n "$health_timeout" ] && ! [[ $health_timeout =~ ^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$ ]]; then
	die "--health-timeout must be a Go duration such as 5m or 90s"
fi
for s in "${allow_privileged[@]}"; do
	[[ $s =~ ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$ ]] || die "--allow-privileged takes a compose service name"
done
if [ -n "$grant" ] && [ "$grant" != "-" ] && [ ! -f "$grant" ]; then
	die "--grant: no such file: $grant"
fi

# check_key OPTION KEY: KEY is a public key as the agent reads it (bundle.ParsePublicKey):
# "ed25519:" and the strict standard base64 of 32 bytes (43 characters, the last with
# its two unused bits zero, and one '='). A message never repeats the key's text: a
# private key given by mistake must not reach a terminal log.
check_key() {
	local opt=$1 key=$2
	if [[ $key == *"PRIVATE KEY"* ]]; then
		die "$opt: this is a private key; give the public key (ed25519:<base64>, the .pub of monky-deployd keygen)"
	fi
	if [ "$opt" = --trusted-key ] && { [[ $key == /* ]] || [[ $key == ./* ]] || [[ $key == *.pub ]] || [ -f "$key" ]; }; then
		die "--trusted-key takes the key itself (ed25519:<base64>, the text of the .pub), not a file; use --trusted-key-file PATH"
	fi
	if ! [[ $key =~ ^ed25519:[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$ ]]; then
		die "$opt must be an ed25519 public key, ed25519:<base64 of 32 bytes> (44 characters after 'ed25519:'), as 'monky-deployd keygen' writes it in its .pub"
	fi
}
for i in "${!trusted_keys[@]}"; do
	f=${trusted_key_files[$i]}
	if [ -n "$f" ]; then
		[ -f "$f" ] || die "--trusted-key-file: no such file: $f"
		if grep -q 'PRIVATE KEY' "$f"; then
			die "--trusted-key-file: $f is a private key; give its .pub (the public key of monky-deployd keygen)"
		fi
		# The .pub holds one line; white space around it (its final newline) is ignored.
		k=$(<"$f")
		k=${k#"${k%%[![:space:]]*}"}
		trusted_keys[i]=${k%"${k##*[![:space:]]}"}
		check_key --trusted-key-file "${trusted_keys[$i]}"
	else
		check_key --trusted-key "${trusted_keys[$i]}"
	fi
	for ((j = 0; j < i; j++)); do
		[ "${trusted_keys[$j]}" != "${trusted_keys[$i]}" ] || die "--trusted-key: trusted key $((i + 1)) is given twice (the same as trusted key $((j + 1))); the agent refuses a repeated key"
	done
done

# --- helpers that honour --root and --dry-run ---------------------------------------

changed=0

# run CMD...: run a command that changes the machine (printed, not run, under --dry-run).
run() {
	if [ "$dry_run" = 1 ]; then
		say "would run: $*"
		return 0
	fi
	"$@"
}

# ensure_dir PATH MODE: create the directory (and parents) and set its mode.
ensure_dir() {
	local path=$root$1 mode=$2
	if [ -d "$path" ] && [ "$(stat -c '%a' "$path")" = "${mode#0}" ]; then
		return 0
	fi
	changed=1
	if [ "$dry_run" = 1 ]; then
		say "would create directory $1 (mode $mode)"
		return 0
	fi
	install -d -m "$mode" "$path"
	say "directory $1 (mode $mode)"
}

# ensure_hold: the hold group, its directory (2770 root:monky-hold) and the members
# --hold-user names, as postinst does. In a scratch root (--root) only the directory:
# the group is the box's.
ensure_hold() {
	if [ -z "$root" ] && ! getent group "$HOLD_GROUP" >/dev/null; then
		changed=1
		run groupadd --system "$HOLD_GROUP"
	fi
	ensure_dir "$HOLD_DIR" 2770
	if [ -z "$root" ] && [ "$dry_run" = 0 ] && [ "$(stat -c '%G' "$HOLD_DIR")" != "$HOLD_GROUP" ]; then
		changed=1
		chgrp "$HOLD_GROUP" "$HOLD_DIR"
		chmod 2770 "$HOLD_DIR"
		say "directory $HOLD_DIR: group $HOLD_GROUP"
	fi
	local u
	for u in "${hold_users[@]}"; do
		[ -z "$root" ] || die "--hold-user needs the box itself, not --root"
		if id -nG "$u" 2>/dev/null | tr ' ' '\n' | grep -qx "$HOLD_GROUP"; then
			continue
		fi
		changed=1
		run usermod -aG "$HOLD_GROUP" "$u"
		say "user $u may hold the box (group $HOLD_GROUP, from their next login)"
	done
}

# put_file PATH MODE SRC: replace PATH with the content of SRC atomically (temp file
# in the same directory with the final mode from the start, fsync, rename), unless it
# already has that content and mode. LABEL names it in messages; content is never printed.
put_file() {
	local path=$root$1 mode=$2 src=$3 label=$4 tmp
	if [ -f "$path" ] && cmp -s "$src" "$path" && [ "$(stat -c '%a' "$path")" = "${mode#0}" ]; then
		say "$label unchanged: $1"
		return 0
	fi
	changed=1
	if [ "$dry_run" = 1 ]; then
		say "would write $label: $1 (mode $mode)"
		return 0
	fi
	tmp=$(umask 077 && mktemp "$(dirname "$path")/.$(basename "$path").XXXXXX")
	pending_tmp=$tmp
	chmod "$mode" "$tmp"
	cat "$src" >"$tmp"
	sync "$tmp" 2>/dev/null || true
	mv -f "$tmp" "$path"
	pending_tmp=""
	sync "$(dirname "$path")" 2>/dev/null || true
	say "wrote $label: $1 (mode $mode)"
}

# yaml_str VALUE: a single-quoted YAML scalar ('' escapes a quote; no other escapes).
yaml_str() {
	local v=${1//\'/\'\'}
	printf "'%s'" "$v"
}

work=$(mktemp -d)
pending_tmp="" # a temp file of put_file not yet renamed: removed if the script dies
trap 'rm -rf "$work"; [ -z "$pending_tmp" ] || rm -f "$pending_tmp"' EXIT

# installed_version: the version of monky-deployd that dpkg has installed, "" if none
# (a removed package whose conffiles remain does not count).
installed_version() {
	local status
	status=$(dpkg-query -W -f '${db:Status-Status} ${Version}' monky-deployd 2>/dev/null || true)
	case $status in
	"installed "*) echo "${status#installed }" ;;
	esac
}

# --- 1. the package --------------------------------------------------------------------

if [ "$skip_package" = 1 ]; then
	say "package: skipped (--skip-package)"
elif [ -n "$root" ]; then
	# A scratch root: unpack the .deb and do what postinst does to the file system.
	# tar --compare: every file of the package is there with its content and mode.
	if [ -d "$root" ] && dpkg-deb --fsys-tarfile "$deb" | tar --compare -C "$root" >/dev/null 2>&1; then
		say "package: $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) already unpacked in $root"
	else
		changed=1
		run install -d -m 0755 "$root"
		run dpkg-deb -x "$deb" "$root"
		[ "$dry_run" = 1 ] || say "package: unpacked $deb into $root"
	fi
elif [ -n "$deb" ]; then
	want=$(dpkg-deb -f "$deb" Version)
	have=$(installed_version)
	if [ "$have" = "$want" ]; then
		say "package: monky-deployd $want already installed"
	else
		changed=1
		run apt-get install -y "$(realpath "$deb")"
	fi
else
	have=$(installed_version)
	if [ "$have" = "$version" ]; then
		say "package: monky-deployd $version already installed"
	else
		changed=1
		run apt-get install -y "monky-deployd=$version"
	fi
fi

# Both units run /usr/bin/monky-deployd: with the package's units in place (not under a
# --dry-run that installed nothing), the binary must be there too, or every tick fails.
if [ -f "$root/lib/systemd/system/$LOOP" ] || [ -f "$root/lib/systemd/system/monky-deployd.service" ]; then
	if [ ! -f "$root/usr/bin/monky-deployd" ] || [ ! -x "$root/usr/bin/monky-deployd" ]; then
		die "/usr/bin/monky-deployd is missing or not executable, and the installed units run it; reinstall the package"
	fi
	say "binary: /usr/bin/monky-deployd (the units run it)"
fi

# --- 2. directories -------------------------------------------------------------------

ensure_dir "$CONFIG_DIR" 0750
ensure_dir "$STATE_DIR" 0700
ensure_dir "$STATE_DIR/docker" 0700
ensure_dir "$deploy_dir" 0755
ensure_hold

# --- 3. the config --------------------------------------------------------------------

config=$CONFIG_DIR/config.yaml
config_written=0 # this run writes the config (or would, under --dry-run)
config_changed=0
if [ -f "$root$config" ] && [ "$force_config" = 0 ]; then
	say "config kept: $config exists (use --force-config to replace it)"
	if [ ${#trusted_keys[@]} -gt 0 ]; then
		say "note: --trusted-key ignored: the kept config's trusted_keys stay as they are (--force-config rewrites it)"
	fi
else
	config_written=1
	[ -n "$env_id" ] || die "--env-id is required to write $config"
	[ -n "$tenancy_url" ] || die "--tenancy-url is required to write $config"
	[ -n "$bao_addr" ] || die "--bao-addr is required to write $config"
	{
		echo "# monky-deployd config, written by install.sh. docs/OPERATIONS.md lists every key."
		echo "env_id: $(yaml_str "$env_id")"
		echo "deploy_dir: $(yaml_str "$deploy_dir")"
		[ -z "$min_free_mb" ] || echo "min_free_mb: $min_free_mb"
		echo "tenancy:"
		echo "  transport: $(yaml_str "$transport")"
		echo "  url: $(yaml_str "$tenancy_url")"
		if [ "$transport" = sdk ]; then
			echo "  service: $(yaml_str "${tenancy_service:-monky-tenancy}")"
			echo "  identity: $(yaml_str "${identity:-$CONFIG_DIR/identity.json}")"
		fi
		[ -z "$proxy" ] || echo "  proxy: $(yaml_str "$proxy")"
		[ -z "$tenancy_ca_file" ] || echo "  ca_file: $(yaml_str "$tenancy_ca_file")"
		[ -z "$server_name" ] || echo "  server_name: $(yaml_str "$server_name")"
		echo "bao:"
		echo "  addr: $(yaml_str "$bao_addr")"
		[ -z "$bao_namespace" ] || echo "  namespace: $(yaml_str "$bao_namespace")"
		[ -z "$bao_ca_file" ] || echo "  ca_file: $(yaml_str "$bao_ca_file")"
		if [ -n "$compose_project" ] || [ -n "$health_timeout" ] || [ -n "$keep_releases" ] || [ ${#allow_privileged[@]} -gt 0 ]; then
			echo "compose:"
			[ -z "$compose_project" ] || echo "  project: $(yaml_str "$compose_project")"
			[ -z "$health_timeout" ] || echo "  health_timeout: $(yaml_str "$health_timeout")"
			[ -z "$keep_releases" ] || echo "  keep_releases: $keep_releases"
			if [ ${#allow_privileged[@]} -gt 0 ]; then
				echo "  allow_privileged:"
				for s in "${allow_privileged[@]}"; do
					echo "    - $(yaml_str "$s")"
				done
			fi
		fi
		if [ ${#trusted_keys[@]} -gt 0 ]; then
			echo "trusted_keys:"
			for k in "${trusted_keys[@]}"; do
				echo "  - $(yaml_str "$k")"
			done
		fi
	} >"$work/config.yaml"
	before=$changed
	changed=0
	put_file "$config" 0640 "$work/config.yaml" config
	config_changed=$changed
	changed=$((before | changed))
fi

# --- 4. the grant ---------------------------------------------------------------------

if [ -n "$grant" ]; then
	if [ "$grant" = "-" ]; then
		(umask 077 && cat >"$work/grant")
		src=$work/grant
	else
		src=$grant
	fi
	if [ ! -s "$src" ]; then
		die "--grant: the grant is empty"
	fi
	put_file "$CONFIG_DIR/bootstrap.jwt" 0600 "$src" grant
else
	say "grant: none given (bootstrap later: docs/OPERATIONS.md, 'Bootstrap')"
fi

# --- 5. a deploy dir other than the default must be writable in the sandbox -------------

dropin_changed=0
for svc in "${SERVICES[@]}"; do
	dropin_dir=/etc/systemd/system/$svc.d
	dropin=$dropin_dir/deploy-dir.conf
	if [ "$deploy_dir" != "$DEFAULT_DEPLOY_DIR" ]; then
		ensure_dir "$dropin_dir" 0755
		printf '# Written by install.sh: the deploy_dir of this box is writable in the sandbox.\n[Service]\nReadWritePaths=%s\n' "$deploy_dir" >"$work/dropin"
		before=$changed
		changed=0
		put_file "$dropin" 0644 "$work/dropin" "unit drop-in"
		dropin_changed=$((dropin_changed | changed))
		changed=$((before | changed))
	elif [ -f "$root$dropin" ]; then
		changed=1
		dropin_changed=1
		run rm -f "$root$dropin"
		say "removed unit drop-in $dropin (deploy_dir is the default again)"
	fi
done

# --- 6. the unit: the loop service for sdk, the timer for proxy and system ------------

# config_transport FILE: tenancy.transport of a config as the agent reads it, "sdk" when
# the key is left out (the agent's default), "?" for a tenancy mapping this script does
# not read (flow style: tenancy: {…}). The agent itself refuses an unknown transport.
config_transport() {
	awk '
		/^tenancy:[[:space:]]*(#.*)?$/ { t = 1; next }
		/^tenancy:/ { print "?"; found = 1; exit }
		/^[^[:space:]#]/ { t = 0; next }
		t && /^[[:space:]]+transport:/ {
			v = $0
			sub(/^[[:space:]]+transport:[[:space:]]*/, "", v)
			sub(/[[:space:]]+#.*$/, "", v)
			sub(/[[:space:]]+$/, "", v)
			if (v ~ /^\x27.*\x27$/ || v ~ /^".*"$/) v = substr(v, 2, length(v) - 2)
			print v
			found = 1
			exit
		}
		END { if (!found) print "sdk" }
	' "$1"
}
if [ "$config_written" = 1 ] || [ ! -f "$root$config" ]; then
	box_transport=$transport # the config this run writes (or, under --dry-run, would)
else
	box_transport=$(config_transport "$root$config")
	if [ "$transport_given" = 1 ] && [ "$transport" != "$box_transport" ]; then
		say "note: --transport $transport ignored: the kept config says $box_transport, and it decides (--force-config rewrites it)"
	fi
fi
case $box_transport in
sdk) unit=$LOOP other=$TIMER ;;
proxy | system) unit=$TIMER other=$LOOP ;;
*) die "cannot read tenancy.transport of $config ('$box_transport'): write tenancy as a block with transport: sdk, proxy or system" ;;
esac

# started UNIT: active, or on its way (a loop waiting for its restart counts).
started() {
	case $(systemctl is-active "$1" 2>/dev/null || true) in
	active | activating | reloading) return 0 ;;
	esac
	return 1
}
state_of() { echo "$1 $(systemctl is-enabled "$1" 2>/dev/null || true), $(systemctl is-active "$1" 2>/dev/null || true)"; }

if [ -n "$root" ]; then
	say "units: $unit for transport $box_transport; not enabled (--root: no systemctl in a scratch root)"
elif [ ! -d /run/systemd/system ]; then
	say "units: systemd is not running here; run 'monky-deployd run --loop' under your own supervisor"
else
	if [ "$dropin_changed" = 1 ]; then
		run systemctl daemon-reload
	fi
	# The other way of ticking goes first: the two conflict.
	if systemctl is-enabled --quiet "$other" || started "$other"; then
		changed=1
		run systemctl disable --now "$other"
	fi
	if [ "$no_start" = 1 ]; then
		if ! systemctl is-enabled --quiet "$unit"; then
			changed=1
			run systemctl enable "$unit"
		fi
	elif ! systemctl is-enabled --quiet "$unit" || ! started "$unit"; then
		changed=1
		run systemctl enable --now "$unit"
		unit_started=1
	fi
	# A loop that was running read its config and got its sandbox when it started.
	if [ "${unit_started:-0}" = 0 ] && [ "$unit" = "$LOOP" ] && started "$unit" &&
		{ [ "$config_changed" = 1 ] || [ "$dropin_changed" = 1 ]; }; then
		changed=1
		run systemctl restart "$unit"
	fi
	say "units: transport $box_transport: $(state_of "$unit"); $(state_of "$other")"
fi

if [ "$changed" = 0 ]; then
	say "done: nothing changed"
elif [ "$dry_run" = 1 ]; then
	say "done: dry run, nothing changed"
else
	say "done"
fi
