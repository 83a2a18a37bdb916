#!/usr/bin/env bash
# Packs a static binary (hack/static-build.sh) into an OCI image FROM scratch, run as user
# 65532, and writes it as an OCI archive with gzip layers, the form a registry stores unchanged
# (`skopeo copy --preserve-digests oci-archive:OUT docker://...`). Prints the image's manifest
# digest, the one install manifests pin. Built with --timestamp 0, so the same binary gives the
# same digest on any machine. Needs podman (make cluster-deps installs it).
#
# Usage: hack/image.sh BINARY REF OUT.tar     e.g. hack/image.sh bin/manager planmode-operator:v0.3.0 manager.tar
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: hack/image.sh BINARY REF OUT.tar" >&2; exit 2; }
bin=$1 ref=$2 out=$3
command -v podman >/dev/null || { echo "image: podman is missing: run make cluster-deps" >&2; exit 1; }
name=$(basename "$bin")
ctx=$(mktemp -d); trap 'rm -rf "$ctx"' EXIT
cp "$bin" "$ctx/$name"
printf 'FROM scratch\nCOPY %s /%s\nUSER 65532:65532\nENTRYPOINT ["/%s"]\n' "$name" "$name" "$name" > "$ctx/Containerfile"
podman build -q --timestamp 0 -t "$ref" "$ctx" >/dev/null
rm -f "$out"
podman push -q --format oci --compression-format gzip --digestfile "$ctx/digest" "$ref" "oci-archive:$out:$ref"
podman rmi -f "$ref" >/dev/null 2>&1 || true
cat "$ctx/digest"; echo
