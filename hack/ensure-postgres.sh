#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries (initdb, pg_ctl, postgres) are installed, from
# Debian's packages when missing. The tests start their own throwaway server from them.
set -euo pipefail
find_pg() {
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
  done
  command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
  return 1
}
if dir=$(find_pg); then
  echo "postgres: server binaries in $dir" >&2
  exit 0
fi
echo "postgres: installing Debian's postgresql packages" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
dir=$(find_pg) || { echo "postgres: install finished but no initdb/postgres found" >&2; exit 1; }
echo "postgres: server binaries in $dir" >&2
