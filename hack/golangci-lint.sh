#!/usr/bin/env bash
# Builds golangci-lint from Go modules, because release downloads are unreachable here and on
# air-gapped build machines, then runs it. The version is the one required by hack/tools/go.mod
# (a module of its own, so the linter's many dependencies stay out of the project's go.mod).
# The binary lands in bin/golangci-lint-<version> and is rebuilt only when that version or the
# Go toolchain changes (a stamp file records what it was built from): a linter built by an
# older Go cannot load packages written for a newer one.
#
# Usage: hack/golangci-lint.sh            builds if needed, prints the binary's path
#        hack/golangci-lint.sh ARGS...    builds if needed, runs golangci-lint ARGS... in the repo root
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pkg=github.com/golangci/golangci-lint/v2
version=$(cd "$root/hack/tools" && go list -m -f '{{.Version}}' "$pkg")
bin="$root/bin/golangci-lint-$version"
stamp="$bin.built-from"
want="golangci-lint $version $(go env GOVERSION)"

log() { echo "golangci-lint.sh: $*" >&2; }

if [ ! -x "$bin" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "building golangci-lint $version (several minutes cold on 2 cores)"
  start=$(date +%s)
  mkdir -p "$root/bin"
  rm -f "$stamp"
  (cd "$root/hack/tools" && go build -trimpath -ldflags "-s -w" -o "$bin" "$pkg/cmd/golangci-lint")
  echo "$want" > "$stamp"
  log "built $bin in $(( $(date +%s) - start ))s"
fi

if [ $# -eq 0 ]; then
  echo "$bin"
  exit 0
fi
cd "$root"
exec "$bin" "$@"
