#!/usr/bin/env bash
# Build the pinned docker compose v2 (github.com/docker/compose/v2, the version
# go.mod requires) and install it as the docker CLI plugin, for the real-engine
# tests (test/engine). CI runs:
#
#   bash tools/compose/build.sh --install
#
# `go install github.com/docker/compose/v2/cmd@version` does not work: compose's
# go.mod carries exclude directives, which go install refuses; this module
# repeats them.
#
# The build takes about four minutes on two cores and runs under nice. The
# result is kept outside the clone, in $MONKY_TOOLS_CACHE (default
# /var/cache/monky-deployd/tools), keyed by go.mod, go.sum and the Go version,
# so that CI on a fresh clone reuses it; pass --force to rebuild anyway.
# --install copies it to /usr/local/lib/docker/cli-plugins/docker-compose.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

force=0 install=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --install) install=1 ;;
    *) echo "usage: $0 [--force] [--install]" >&2; exit 2 ;;
  esac
done

export GOWORK=off
export GOFLAGS=-mod=readonly

version="$(go list -m -f '{{.Version}}' github.com/docker/compose/v2)"
stamp="$( (cat go.mod go.sum; go version) | sha256sum | cut -c1-16)"
cache="${MONKY_TOOLS_CACHE:-/var/cache/monky-deployd/tools}/compose-$version-$stamp"
bin="$cache/docker-compose"

if [[ $force -eq 1 || ! -x "$bin" ]]; then
  echo "tools/compose: building docker compose $version (this takes several minutes)"
  start=$SECONDS
  mkdir -p "$cache"
  nice -n 10 go build -trimpath \
    -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$version" \
    -o "$bin.tmp" github.com/docker/compose/v2/cmd
  mv -f "$bin.tmp" "$bin"
  echo "tools/compose: built $bin in $((SECONDS - start))s"
else
  echo "tools/compose: $bin ($version) is up to date"
fi

mkdir -p bin
ln -sfn "$bin" bin/docker-compose
if [[ $install -eq 1 ]]; then
  install -D -m 0755 "$bin" /usr/local/lib/docker/cli-plugins/docker-compose
  echo "tools/compose: installed /usr/local/lib/docker/cli-plugins/docker-compose"
fi
"$bin" version
