#!/usr/bin/env bash
# Builds the envtest binaries (kube-apiserver, etcd, kubectl) from Go modules, because release
# downloads are unreachable here and on air-gapped build machines. The result lands in the
# setup-envtest layout, bin/k8s/<version>-linux-amd64, and is rebuilt only when a pinned
# version changes (a stamp file records what was built).
#
# Usage: hack/envtest-binaries.sh [K8S_VERSION] [ETCD_VERSION]
#   K8S_VERSION defaults to the k8s.io/api version in go.mod (v0.X.Y -> 1.X.Y).
# Prints the asset directory on its last line of stdout.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=${1:-}
if [ -z "$k8s_version" ]; then
  api=$(cd "$root" && go list -m -f '{{.Version}}' k8s.io/api)
  k8s_version="1.${api#v0.}"
fi
etcd_version=${2:-3.7.3}
goos=$(go env GOOS); goarch=$(go env GOARCH)
assets="$root/bin/k8s/${k8s_version}-${goos}-${goarch}"
stamp="$assets/.built-from"
want="kubernetes v${k8s_version} etcd v${etcd_version} $(go env GOVERSION)"

log() { echo "envtest-binaries: $*" >&2; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -x "$assets/kube-apiserver" ] && [ -x "$assets/etcd" ] && [ -x "$assets/kubectl" ]; then
  log "up to date in $assets ($want)"
  echo "$assets"
  exit 0
fi

free_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
if [ "${free_kb:-0}" -lt 3000000 ]; then
  log "warning: less than 3 GB of memory available; the kube-apiserver link may fail"
fi

work="$root/bin/.envtest-build"
mkdir -p "$work/k8s" "$work/etcd" "$assets"

# Cold builds take many minutes; go build -v names each package it compiles, and buildprogress
# turns that into a line every 20 s with the count, the elapsed time and an estimate.
(cd "$root" && go build -o "$work/buildprogress" ./hack/buildprogress)
build() { # label package output
  local total
  total=$(CGO_ENABLED=0 GOFLAGS=-mod=mod go list -deps "$2" 2>/dev/null | wc -l)
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "$ldflags" -o "$3" "$2" 2>&1 \
    | "$work/buildprogress" -label "$1" -total "$total"
}

# --- kube-apiserver and kubectl -------------------------------------------------------------
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local paths;
# a wrapper module must replace every one of them with the published v0.X.Y instead.
staging_version="v0.${k8s_version#1.}"
log "downloading k8s.io/kubernetes v${k8s_version} and its modules (staging modules at ${staging_version}); a minute or more on a cold module cache"
cd "$work/k8s"
cat > go.mod <<GOMOD
module envtestbuild/k8s

go 1.26
GOMOD
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v${k8s_version}" > kmod.json
kgomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' kmod.json)
# staging modules: k8s.io/* required at v0.0.0 (not the sample-* ones, which only appear in replace)
staging=$(awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r&&$1 ~ /^k8s\.io\// && $2=="v0.0.0" {print $1}' "$kgomod" | sort -u)
{
  echo "require k8s.io/kubernetes v${k8s_version}"
  for m in $staging; do echo "require $m ${staging_version}"; done
  for m in $staging; do echo "replace $m => $m ${staging_version}"; done
} >> go.mod
log "replacing $(echo "$staging" | wc -l) staging modules"
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod download

ldflags_for() { # $1 = package holding the version vars
  echo "-X $1.gitVersion=v${k8s_version} -X $1.gitMajor=${k8s_version%%.*} -X $1.gitMinor=$(echo "$k8s_version" | cut -d. -f2) -X $1.gitTreeState=clean -X $1.buildDate=1970-01-01T00:00:00Z"
}
ldflags="-s -w $(ldflags_for k8s.io/component-base/version) $(ldflags_for k8s.io/client-go/pkg/version)"

log "building kube-apiserver: the longest step, many minutes with a cold Go cache on 2 cores (longer on a busy machine), ~3 GB of memory; progress follows"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$assets/kube-apiserver"

log "building kubectl (shares most packages with kube-apiserver)"
build kubectl k8s.io/kubernetes/cmd/kubectl "$assets/kubectl"

# --- etcd -------------------------------------------------------------------------------------
log "building etcd v${etcd_version}"
cd "$work/etcd"
cat > go.mod <<GOMOD
module envtestbuild/etcd

go 1.26

require go.etcd.io/etcd/server/v3 v${etcd_version}
GOMOD
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod download
ldflags="-s -w"
build etcd go.etcd.io/etcd/server/v3 "$assets/etcd"

"$assets/kube-apiserver" --version >&2
# Not `| head -1`: head exits after one line, etcd then dies of SIGPIPE on the next, and
# pipefail turns that race into a failed build (CI exit 141).
etcd_version=$("$assets/etcd" --version)
echo "${etcd_version%%$'\n'*}" >&2
"$assets/kubectl" version --client >&2 || true
# Stamp only binaries that ran, so a failed check rebuilds next time.
echo "$want" > "$stamp"
echo "$assets"
