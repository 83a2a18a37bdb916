#!/usr/bin/env bash
# Builds one of the project's commands as the static binary its image ships: CGO_ENABLED=0 (the
# SQLite driver is pure Go), trimmed paths, stripped, the version stamped. The Dockerfile and
# hack/cluster/images.sh both call it, so the registry image and the offline FROM scratch image
# carry the same binary for the same source.
#
# Usage: [VERSION=...] [COMMIT=...] [GOOS=...] [GOARCH=...] hack/static-build.sh OUTPUT PACKAGE
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: hack/static-build.sh OUTPUT PACKAGE (e.g. bin/manager ./cmd/manager)" >&2; exit 2; }
pkg=github.com/harness-dev/planmode-operator/internal/version
CGO_ENABLED=0 exec go build -trimpath \
  -ldflags "-s -w -X $pkg.Version=${VERSION:-devel} -X $pkg.Commit=${COMMIT:-}" -o "$1" "$2"
