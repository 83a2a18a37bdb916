#!/usr/bin/env bash
# Builds a command of a Go module the way its own repository builds it: inside the downloaded
# module, so its go.mod and go.sum pin every dependency and its replace directives apply
# (`go install pkg@version` refuses a module with replace directives). CGO off, static.
# Cold builds take minutes; go build -v feeds hack/buildprogress, which prints a line every 20 s.
#
# Usage: hack/modbuild.sh MODULE VERSION PACKAGE OUTPUT [LDFLAGS]
#   e.g. hack/modbuild.sh helm.sh/helm/v4 v4.3.2 ./cmd/helm bin/helm-v4.3.2
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: hack/modbuild.sh MODULE VERSION PACKAGE OUTPUT [LDFLAGS]" >&2; exit 2; }
module=$1 version=$2 pkg=$3 out=$4 ldflags=${5:-}
root=$(cd "$(dirname "$0")/.." && pwd)
case $out in /*) ;; *) out=$root/$out ;; esac
mkdir -p "$(dirname "$out")" "$root/bin/.modbuild"

dir=$(cd "$root/bin/.modbuild" && GOFLAGS= GOWORK=off go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "modbuild: go mod download $module@$version gave no directory" >&2; exit 1; }
(cd "$root" && go build -o "$root/bin/.modbuild/buildprogress" ./hack/buildprogress)
cd "$dir"
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"
total=$(go list -deps "$pkg" 2>/dev/null | wc -l)
go build -v -trimpath -ldflags "-s -w $ldflags" -o "$out" "$pkg" 2>&1 \
  | "$root/bin/.modbuild/buildprogress" -prefix "modbuild: " -label "$(basename "$out")" -total "$total" >&2
[ -x "$out" ] || { echo "modbuild: building $module $pkg failed" >&2; exit 1; }
