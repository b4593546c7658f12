#!/usr/bin/env bash
# Build the pinned OpenZiti CLI into tools/ziti/bin/ziti for the real-mesh
# tests (test/ziti). CI runs:
#
#   bash tools/ziti/build.sh && \
#     ZITI_BIN=$PWD/tools/ziti/bin/ziti go test -tags ziti -count=1 ./test/ziti/...
#
# The version is the one go.mod requires; go.sum is complete, so the build
# needs the module proxy (or a warm module cache) but no checksum-database
# lookup. `go install github.com/openziti/ziti/ziti@version` does not work:
# ziti's go.mod carries a replace directive, which go install refuses.
#
# The build is heavy (several minutes on two cores, 20 on a busy machine) and runs
# under nice. The result is kept outside the clone, in $MONKY_TOOLS_CACHE (default
# /var/cache/monky-deployd/tools), keyed by go.mod, go.sum and the Go version, so that
# CI on a fresh clone reuses it; bin/ziti links to it. Pass --force to rebuild anyway.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

force=0
case "${1:-}" in
  --force) force=1 ;;
  "") ;;
  *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

export GOWORK=off
export GOFLAGS=-mod=readonly

version="$(go list -m -f '{{.Version}}' github.com/openziti/ziti)"
stamp="$( (cat go.mod go.sum; go version) | sha256sum | cut -d' ' -f1)"

cache="${MONKY_TOOLS_CACHE:-/var/cache/monky-deployd/tools}/ziti-$version-${stamp:0:16}"
mkdir -p bin "$cache"
if [[ $force -eq 0 && -x "$cache/ziti" ]]; then
  ln -sfn "$cache/ziti" bin/ziti
  echo "tools/ziti: $cache/ziti ($version) is up to date"
  exit 0
fi

echo "tools/ziti: building ziti $version (this takes several minutes)"
start=$SECONDS
nice -n 10 go build -trimpath \
  -ldflags "-s -w -X github.com/openziti/ziti/common/version.Version=$version -X github.com/openziti/ziti/common/version.Revision=module" \
  -o "$cache/ziti.tmp" github.com/openziti/ziti/ziti
mv -f "$cache/ziti.tmp" "$cache/ziti"
ln -sfn "$cache/ziti" bin/ziti
echo "tools/ziti: built $cache/ziti ($version) in $((SECONDS - start))s"
bin/ziti version
