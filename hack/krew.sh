#!/usr/bin/env bash
# Builds krew and krew-index's manifest validator (sigs.k8s.io/krew, from Go modules, inside
# the downloaded module: hack/modbuild.sh) into bin/krew-<version>/, for test/release to
# validate and install the release's krew manifest as users do. Rebuilt when the version or the
# Go toolchain changes.
#
# Usage: hack/krew.sh     builds if needed, prints the directory (krew, validate-krew-manifest)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=v0.4.3
dir=$root/bin/krew-$version
stamp=$dir/.built-from
want="krew $version $(go env GOVERSION)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$dir/krew" ] && [ -x "$dir/validate-krew-manifest" ]; then
  echo "$dir"; exit 0
fi
rm -f "$stamp"
for cmd in krew validate-krew-manifest; do
  start=$(date +%s)
  "$root/hack/modbuild.sh" sigs.k8s.io/krew "$version" "./cmd/$cmd" "$dir/$cmd" "-X sigs.k8s.io/krew/internal/version.gitTag=$version"
  echo "krew.sh: built $cmd in $(( $(date +%s) - start ))s" >&2
done
echo "$want" > "$stamp"
echo "$dir"
