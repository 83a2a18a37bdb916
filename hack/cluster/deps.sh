#!/usr/bin/env bash
# Installs the Debian packages the test cluster needs when one is missing: containerd and runc
# (the container runtime), the CNI plugins (bridge, host-local, portmap), iptables (kube-proxy),
# podman (builds the FROM scratch images offline), openssl and curl (pki.sh, up.sh's waits).
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have containerd || need+=(containerd)
have runc || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
have iptables || need+=(iptables)
have podman || need+=(podman)
have openssl || need+=(openssl)
have curl || need+=(curl)
if [ ${#need[@]} -eq 0 ]; then echo "cluster-deps: all present" >&2; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "cluster-deps: run as root to install ${need[*]}" >&2; exit 1; }
echo "cluster-deps: installing ${need[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
