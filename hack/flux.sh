#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from Go modules (hack/modbuild.sh:
# inside each downloaded module, their replace directives honoured) into bin/flux/, with their
# CRDs beside them, rebuilt only when a version or the Go toolchain changes. test/cluster runs
# them as pods (images FROM scratch) to reconcile a Git repository it serves.
#
# Usage: hack/flux.sh     builds if needed, prints the directory (source-controller,
#                         kustomize-controller, crds/*.yaml)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Flux v2.8.0's controllers, which share their dependencies (so the second build reuses most
# of the first): the newest releases need Go 1.27, and the later v1.9 patches of
# source-controller require github.com/fluxcd/pkg/artifact versions the module proxy does not serve.
source_version=v1.9.0
kustomize_version=v1.9.0
# Test-only requirements whose go.mod the module proxy does not serve.
export MODBUILD_DROP_REQUIRE="github.com/fluxcd/pkg/helmtestserver"
dir=$root/bin/flux
stamp=$dir/.built-from
want="source-controller $source_version kustomize-controller $kustomize_version $(go env GOVERSION)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$dir/source-controller" ] && [ -x "$dir/kustomize-controller" ]; then
  echo "$dir"; exit 0
fi
rm -f "$stamp"; mkdir -p "$dir/crds"
for c in source-controller:$source_version kustomize-controller:$kustomize_version; do
  name=${c%%:*} version=${c#*:}
  echo "flux.sh: building $name $version (many minutes cold on 2 cores)" >&2
  start=$(date +%s)
  "$root/hack/modbuild.sh" "github.com/fluxcd/$name" "$version" . "$dir/$name"
  echo "flux.sh: built $name in $(( $(date +%s) - start ))s" >&2
  src=$(cd "$root/bin/.modbuild" && GOFLAGS= go mod download -json "github.com/fluxcd/$name@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  cp -f "$src"/config/crd/bases/*.yaml "$dir/crds/"
  chmod u+w "$dir"/crds/*.yaml
done
echo "$want" > "$stamp"
echo "$dir"
