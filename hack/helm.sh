#!/usr/bin/env bash
# Builds Helm v4 from Go modules (release downloads are unreachable here and on air-gapped build
# machines) into bin/helm-<version>, at the version go.mod requires (test/chart uses Helm's Go
# packages, so one version serves both), rebuilt only when that version or the Go toolchain
# changes. Helm is built inside its own module (hack/modbuild.sh), with its own dependencies.
#
# Usage: hack/helm.sh            builds if needed, prints the binary's path
#        hack/helm.sh ARGS...    builds if needed, runs helm ARGS...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(cd "$root" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
bin=$root/bin/helm-$version
stamp=$bin.built-from
want="helm $version $(go env GOVERSION)"
if [ ! -x "$bin" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "helm.sh: building helm $version (minutes cold on 2 cores)" >&2
  start=$(date +%s)
  rm -f "$stamp"
  "$root/hack/modbuild.sh" helm.sh/helm/v4 "$version" ./cmd/helm "$bin" \
    "-X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  echo "$want" > "$stamp"
  echo "helm.sh: built $bin in $(( $(date +%s) - start ))s" >&2
fi
[ $# -eq 0 ] && { echo "$bin"; exit 0; }
exec "$bin" "$@"
