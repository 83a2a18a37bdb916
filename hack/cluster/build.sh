#!/usr/bin/env bash
# Builds what the single-node test cluster needs from the Go module proxy (no registry, no release
# downloads), one build at a time, into bin/cluster/<k8s-version>-<os>-<arch>/:
#   kubelet, kube-controller-manager, kube-scheduler, kube-proxy at the Kubernetes version go.mod
#   pins (k8s.io/api v0.X.Y -> 1.X.Y); crictl (down.sh removes pods through CRI so CNI teardown
#   runs); CoreDNS with a minimal plugin set; kube-apiserver, etcd, kubectl from
#   hack/envtest-binaries.sh; and the pause and CoreDNS images (FROM scratch, docker-archive).
# A stamp records the versions and the Go toolchain; a change of any of them rebuilds.
#
# Usage: hack/cluster/build.sh      prints the directory on its last line of stdout
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
crictl_version=v1.37.0
coredns_version=v1.15.0
pause_tag=registry.k8s.io/pause:3.10.1

api=$(cd "$root" && go list -m -f '{{.Version}}' k8s.io/api)
k8s_version="1.${api#v0.}"
staging_version="v0.${k8s_version#1.}"
dir="$root/bin/cluster/${k8s_version}-$(go env GOOS)-$(go env GOARCH)"
stamp="$dir/.built-from"
want="kubernetes v${k8s_version} crictl ${crictl_version} coredns ${coredns_version} $(go env GOVERSION)"
work="$root/bin/cluster/.build"

log() { echo "cluster-build: $*" >&2; }
timed() { # label cmd...
  local label=$1 s; s=$(date +%s); shift
  "$@"; log "built $label in $(( $(date +%s) - s ))s"
}

bins=(kubelet kube-controller-manager kube-scheduler kube-proxy crictl coredns kube-apiserver etcd kubectl)
uptodate() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  for b in "${bins[@]}"; do [ -x "$dir/$b" ] || return 1; done
  for i in pause coredns; do [ -f "$dir/images/$i.tar" ] || return 1; done
}
if uptodate; then log "up to date in $dir ($want)"; echo "$dir"; exit 0; fi

for tool in podman; do
  command -v $tool >/dev/null || { log "$tool is missing: run hack/cluster/deps.sh (make cluster-deps)"; exit 1; }
done
rm -f "$stamp"
mkdir -p "$dir/images" "$work"

# kube-apiserver, etcd, kubectl: the envtest build (cached by its own stamp).
envtest=$("$root/hack/envtest-binaries.sh" "$k8s_version" | tail -1)
for b in kube-apiserver etcd kubectl; do cp -f "$envtest/$b" "$dir/$b"; done

# --- node components: a wrapper module requiring k8s.io/kubernetes with its staging modules
# replaced by the published versions (k8s.io/kubernetes requires them at v0.0.0).
mkdir -p "$work/k8s"; cd "$work/k8s"
printf 'module clusterbuild/k8s\n\ngo 1.26\n' > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
kgomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v${k8s_version}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
staging=$(awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r&&$1 ~ /^k8s\.io\// && $2=="v0.0.0" {print $1}' "$kgomod" | sort -u)
{ echo "require k8s.io/kubernetes v${k8s_version}"
  for m in $staging; do echo "require $m ${staging_version}"; done
  for m in $staging; do echo "replace $m => $m ${staging_version}"; done; } >> go.mod
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod download
lf() { echo "-X $1.gitVersion=v${k8s_version} -X $1.gitMajor=${k8s_version%%.*} -X $1.gitMinor=$(echo "$k8s_version" | cut -d. -f2) -X $1.gitTreeState=clean -X $1.buildDate=1970-01-01T00:00:00Z"; }
ldflags="-s -w $(lf k8s.io/component-base/version) $(lf k8s.io/client-go/pkg/version)"
for c in kubelet kube-controller-manager kube-scheduler kube-proxy; do
  log "building $c v${k8s_version} (minutes on a cold Go cache)"
  timed "$c" env CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$dir/$c" "k8s.io/kubernetes/cmd/$c"
done

# --- crictl
mkdir -p "$work/crictl"; cd "$work/crictl"
printf 'module clusterbuild/crictl\n\ngo 1.26\n\nrequire sigs.k8s.io/cri-tools %s\n' "$crictl_version" > go.mod
printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/cri-tools/cmd/crictl"\n' > tools.go
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod download
log "building crictl ${crictl_version}"
timed crictl env CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags '-s -w' -o "$dir/crictl" sigs.k8s.io/cri-tools/cmd/crictl

# --- CoreDNS with the plugins a test cluster needs (no forward: it answers cluster names only)
mkdir -p "$work/coredns"; cd "$work/coredns"
printf 'module clusterbuild/coredns\n\ngo 1.26\n\nrequire github.com/coredns/coredns %s\n' "$coredns_version" > go.mod
cat > main.go <<'GO'
// CoreDNS with only the plugins the test cluster's Corefile uses.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
GO
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod download
log "building CoreDNS ${coredns_version}"
timed CoreDNS env CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags '-s -w' -o "$dir/coredns" .

# --- images: FROM scratch, saved as docker-archives that up.sh imports into containerd
image() { # context tag name
  podman build -q -t "$2" "$1" >/dev/null
  rm -f "$dir/images/$3.tar"
  podman save -q --format docker-archive -o "$dir/images/$3.tar" "$2"
  echo "$2" > "$dir/images/$3.ref"
  log "image $2 -> images/$3.tar"
}
mkdir -p "$work/images/pause" "$work/images/coredns"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/images/pause/pause" ./hack/cluster/pause)
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$work/images/pause/Containerfile"
image "$work/images/pause" "$pause_tag" pause
cp -f "$dir/coredns" "$work/images/coredns/coredns"
printf 'FROM scratch\nCOPY coredns /coredns\nENTRYPOINT ["/coredns"]\n' > "$work/images/coredns/Containerfile"
image "$work/images/coredns" "localhost/coredns:${coredns_version}" coredns

"$dir/kubelet" --version >&2
echo "$want" > "$stamp"
echo "$dir"
