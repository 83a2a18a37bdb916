#!/usr/bin/env bash
# Builds the project's images for the test cluster offline and loads them into its containerd
# (the `kind load` equivalent): the manager and the reference agent from hack/static-build.sh (the
# binary the Dockerfile builds), and the suite's probe, each FROM scratch as user 65532. Tags are
# the binary's content hash, so a changed binary is a new image and a pod never runs a stale one.
# Writes the image names to $CLUSTER_DIR/images.env for test/cluster. Needs the cluster up.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
C=${CLUSTER_DIR:-$root/.cluster}
SOCK=/run/ck8s/containerd.sock
work=$root/bin/cluster/.images
[ -S $SOCK ] || { echo "images: the test cluster is not up (no $SOCK): run hack/cluster/up.sh (make cluster-up)" >&2; exit 1; }
command -v podman >/dev/null || { echo "images: podman is missing: run make cluster-deps" >&2; exit 1; }
cd "$root"
export VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
export COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
: > "$C/images.env.new"
image() { # name package env-var
  local dir=$work/$1 tag ref
  mkdir -p "$dir"
  hack/static-build.sh "$dir/$1" "$2"
  printf 'FROM scratch\nCOPY %s /%s\nUSER 65532:65532\nENTRYPOINT ["/%s"]\n' "$1" "$1" "$1" > "$dir/Containerfile"
  tag=$(sha256sum "$dir/$1" | cut -c1-12)
  ref=localhost/planmode-$1:$tag
  if ! ctr --address $SOCK -n k8s.io images ls -q | grep -qx "$ref"; then
    podman build -q -t "$ref" "$dir" >/dev/null
    rm -f "$dir/image.tar"
    podman save -q --format docker-archive -o "$dir/image.tar" "$ref"
    ctr --address $SOCK -n k8s.io images import "$dir/image.tar" >/dev/null
    podman rmi -f "$ref" >/dev/null 2>&1 || true
    echo "images: loaded $ref" >&2
  else
    echo "images: $ref already loaded" >&2
  fi
  echo "$3=$ref" >> "$C/images.env.new"
}
image manager ./cmd/manager MANAGER_IMAGE
image refagent ./cmd/refagent REFAGENT_IMAGE
image probe ./test/cluster/probe PROBE_IMAGE
mv "$C/images.env.new" "$C/images.env"
cat "$C/images.env"
