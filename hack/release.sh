#!/usr/bin/env bash
# Writes a versioned release of the operator into RELEASE_DIR (default bin/release/VERSION):
#   planmode-operator.oci.tar          the manager image (FROM scratch, hack/image.sh), an OCI archive
#   install.yaml                       config/default with the image pinned by digest and the version label
#   planmode-operator-X.Y.Z.tgz        the Helm chart (hack/chart) at that version, the image pinned by digest
#   kubectl-plan_VERSION_OS_ARCH.tar.gz  kubectl-plan for linux and darwin, amd64 and arm64
#   plan.yaml                          the krew plugin manifest for those archives
#   checksums.txt                      sha256 of every file above (sha256sum -c checksums.txt)
#   release.env                        VERSION, COMMIT, IMAGE (repository@digest), CHART
# Every binary's --version names VERSION and the commit (internal/version).
#
# Usage: make release VERSION=v0.3.0 [IMAGE_REPOSITORY=registry.example.com/planmode-operator]
#   RELEASE_URL is where the archives will be downloaded from (the krew manifest's uri);
#   RELEASE_BINARIES=0 skips kubectl-plan and the krew manifest (test/cluster's releases).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
VERSION=${VERSION:?set VERSION, e.g. make release VERSION=v0.3.0}
[[ $VERSION =~ ^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]] || { echo "release: VERSION=$VERSION: want vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. v0.3.0" >&2; exit 2; }
semver=${BASH_REMATCH[1]}
COMMIT=${COMMIT:-$(git rev-parse HEAD)}
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "release: warning: the tree has uncommitted changes; the release is built from them, not from $COMMIT" >&2
fi
IMAGE_REPOSITORY=${IMAGE_REPOSITORY:-planmode-operator}
RELEASE_URL=${RELEASE_URL:-https://github.com/harness-dev/planmode-operator/releases/download/$VERSION}
out=${RELEASE_DIR:-$root/bin/release/$VERSION}
case $out in /*) ;; *) out=$root/$out ;; esac
kubectl=${KUBECTL:?set KUBECTL (make release does: the hack-built kubectl)}
helm=$(hack/helm.sh)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rm -rf "$out"; mkdir -p "$out"
export VERSION COMMIT
log() { echo "release: $*" >&2; }

# The manager image.
hack/static-build.sh "$work/manager" ./cmd/manager
digest=$(hack/image.sh "$work/manager" "$IMAGE_REPOSITORY:$VERSION" "$out/planmode-operator.oci.tar")
image=$IMAGE_REPOSITORY@$digest
log "image $image"

# The install manifest: config/default, the image by digest, every object labelled with the version.
mkdir -p "$work/install"
cat > "$work/install/kustomization.yaml" <<KUSTOMIZATION
resources:
- $(realpath --relative-to="$work/install" "$root/config/default")
images:
- name: planmode-operator
  newName: $IMAGE_REPOSITORY
  digest: $digest
labels:
- pairs:
    app.kubernetes.io/version: $VERSION
KUSTOMIZATION
"$kubectl" kustomize --load-restrictor=LoadRestrictionsNone "$work/install" > "$out/install.yaml"
grep -q "image: $image\$" "$out/install.yaml" || { echo "release: install.yaml does not name $image" >&2; exit 1; }

# The chart, from the same install (the unversioned one, so its labels are the chart's own).
"$kubectl" kustomize config/default > "$work/install.yaml"
go run ./hack/chart -install "$work/install.yaml" -out "$work/planmode-operator" -version "$semver" -app-version "$VERSION" \
  -image-repository "$IMAGE_REPOSITORY" -image-digest "$digest" 2>/dev/null
"$helm" lint --strict "$work/planmode-operator" >/dev/null
"$helm" package "$work/planmode-operator" -d "$out" >/dev/null
chart=planmode-operator-$semver.tgz
[ -f "$out/$chart" ] || { echo "release: helm package wrote no $chart" >&2; exit 1; }

files=(planmode-operator.oci.tar install.yaml "$chart")
if [ "${RELEASE_BINARIES:-1}" != 0 ]; then
  platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
  krew_platforms=""
  for p in "${platforms[@]}"; do
    os=${p%/*} arch=${p#*/}
    mkdir -p "$work/$os-$arch"
    GOOS=$os GOARCH=$arch hack/static-build.sh "$work/$os-$arch/kubectl-plan" ./cmd/kubectl-plan
    archive=kubectl-plan_${VERSION}_${os}_${arch}.tar.gz
    # Reproducible: fixed owner, time and order, no gzip timestamp.
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/$os-$arch" -cf - kubectl-plan | gzip -n > "$out/$archive"
    files+=("$archive")
    sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
    krew_platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $RELEASE_URL/$archive
    sha256: $sum
    bin: kubectl-plan
    files:
    - from: kubectl-plan
      to: .
"
    log "kubectl-plan $os/$arch"
  done
  cat > "$out/plan.yaml" <<KREW
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: plan
spec:
  version: $VERSION
  homepage: https://github.com/harness-dev/planmode-operator
  shortDescription: Plan mode for AI coding-agent sessions
  description: |
    Turns plan mode on and off for the AI coding-agent sessions the planmode
    operator manages (AgentSession), shows their committed and pending state
    and their session log, and approves or revises the plans they present.
    Needs planmode-operator $VERSION (or newer) in the cluster.
  platforms:
$krew_platforms
KREW
  files+=(plan.yaml)
fi

(cd "$out" && sha256sum "${files[@]}" > checksums.txt)
cat > "$out/release.env" <<ENV
VERSION=$VERSION
COMMIT=$COMMIT
IMAGE=$image
CHART=$chart
ENV
log "wrote $out: ${files[*]} checksums.txt release.env"
echo "$out"
