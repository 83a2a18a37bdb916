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
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"
# A replace directive onto a directory of the repository that is a module of its own (Flux's
# ./api) names a directory the module's zip does not hold: build a copy without it, on the
# published module at the version go.mod requires (the same repository's tag).
missing=$(awk '$1 == "replace" && $3 == "=>" && $4 ~ /^\.\.?\// {print $2 " " $4}' "$dir/go.mod" | while read -r mod path; do [ -d "$dir/$path" ] || echo "$mod"; done)
# MODBUILD_DROP_REQUIRE names requirements the build does not need (test-only modules) that a
# module proxy may not serve; they are dropped from the copy too.
if [ -n "$missing" ] || [ -n "${MODBUILD_DROP_REQUIRE:-}" ]; then
  copy=$root/bin/.modbuild/src/$(echo "$module" | tr / _)@$version
  rm -rf "$copy"; mkdir -p "$(dirname "$copy")"; cp -r "$dir" "$copy"; chmod -R u+w "$copy"
  for mod in $missing; do (cd "$copy" && go mod edit -dropreplace="$mod"); echo "modbuild: $module: $mod from the module proxy, not the missing replace directory" >&2; done
  for mod in ${MODBUILD_DROP_REQUIRE:-}; do (cd "$copy" && go mod edit -droprequire="$mod"); echo "modbuild: $module: without the test-only requirement $mod" >&2; done
  dir=$copy
  export GOFLAGS="-mod=mod -buildvcs=false"
fi
cd "$dir"
total=$( (go list -deps "$pkg" 2>/dev/null || true) | wc -l)
go build -v -trimpath -ldflags "-s -w $ldflags" -o "$out" "$pkg" 2>&1 \
  | "$root/bin/.modbuild/buildprogress" -prefix "modbuild: " -label "$(basename "$out")" -total "$total" >&2
[ -x "$out" ] || { echo "modbuild: building $module $pkg failed" >&2; exit 1; }
