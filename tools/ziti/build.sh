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
# The build is heavy (several minutes on two cores) and runs under nice. A
# finished build is reused while go.mod, go.sum and the Go version are
# unchanged; pass --force to rebuild anyway.
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

mkdir -p bin
if [[ $force -eq 0 && -x bin/ziti && -f bin/.stamp && "$(cat bin/.stamp)" == "$stamp" ]]; then
  echo "tools/ziti: bin/ziti ($version) is up to date"
  exit 0
fi

echo "tools/ziti: building ziti $version (this takes several minutes)"
start=$SECONDS
nice -n 10 go build -trimpath \
  -ldflags "-s -w -X github.com/openziti/ziti/common/version.Version=$version -X github.com/openziti/ziti/common/version.Revision=module" \
  -o bin/ziti.tmp github.com/openziti/ziti/ziti
mv -f bin/ziti.tmp bin/ziti
printf '%s\n' "$stamp" > bin/.stamp
echo "tools/ziti: built bin/ziti ($version) in $((SECONDS - start))s"
bin/ziti version
