#!/usr/bin/env bash
# Stops the test cluster hack/cluster/up.sh started and removes what it left on the machine:
# processes by the PIDs up.sh recorded, pods through CRI (so the CNI DEL releases veths, IP
# leases and masquerade rules), leftover containerd shims, the iptables chains of kube-proxy and
# the kubelet, mounts under the cluster's directories, the bridges ck8s0 and ck8s-node, the
# kubelet's cgroups. Keeps pki/ and containerd's image store; --purge removes those too.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
C=${CLUSTER_DIR:-$root/.cluster}
R=$C/run
SOCK=/run/ck8s/containerd.sock
CTR="ctr --address $SOCK"
B=$(ls -d "$root"/bin/cluster/*-*-*/ 2>/dev/null | head -1); B=${B%/}

stop() { # name: SIGTERM, then SIGKILL after 10 s
  local f=$R/pids/$1.pid pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null && echo "down: killed -9 $1"
  fi
  rm -f "$f"; echo "down: stopped $1 ($pid)"
}

stop kubelet   # first, so nothing restarts containers
if [ -S $SOCK ]; then
  if [ -n "$B" ] && [ -x "$B/crictl" ]; then
    timeout 60 "$B/crictl" --runtime-endpoint unix://$SOCK rmp -fa >/dev/null 2>&1 || echo "down: crictl rmp failed; removing tasks with ctr"
  fi
  for t in $($CTR -n k8s.io tasks ls -q 2>/dev/null); do $CTR -n k8s.io tasks kill -s SIGKILL "$t" 2>/dev/null; done
  for t in $($CTR -n k8s.io tasks ls -q 2>/dev/null); do
    for _ in $(seq 1 25); do $CTR -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 && break; sleep 0.2; done
  done
  for c in $($CTR -n k8s.io containers ls -q 2>/dev/null); do $CTR -n k8s.io containers delete "$c" >/dev/null 2>&1; done
fi
for n in kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do stop $n; done
# shims of this cluster's containerd that outlived it: matched on its private socket, killed by PID
for pid in $(pgrep -f -- "-address $SOCK" || true); do echo "down: killing leftover shim $pid"; kill "$pid" 2>/dev/null; done
# kube-proxy's KUBE-* rules
[ -n "$B" ] && [ -x "$B/kube-proxy" ] && "$B/kube-proxy" --cleanup >/dev/null 2>&1
# chains the kubelet creates and kube-proxy --cleanup leaves
for ipt in iptables ip6tables; do
  command -v $ipt >/dev/null || continue
  while $ipt -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
  while $ipt -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
  for t in nat filter mangle; do
    for ch in KUBE-KUBELET-CANARY KUBE-FIREWALL KUBE-IPTABLES-HINT KUBE-PROXY-CANARY; do
      $ipt -t $t -F $ch 2>/dev/null && $ipt -t $t -X $ch 2>/dev/null
    done
  done
done
# the bridge CNI's masquerade chains of pods whose DEL did not run (only this cluster's pod CIDR:
# other CNI users on the machine, such as podman, have chains of the same prefix)
iptables -t nat -S POSTROUTING 2>/dev/null | grep -E -- '-s 10\.244\.0\.[0-9]+/32 .*-j CNI-' | while read -r rule; do
  ch=${rule##*-j }
  eval "iptables -t nat ${rule/-A POSTROUTING/-D POSTROUTING}" && iptables -t nat -F "$ch" && iptables -t nat -X "$ch"
done
# mounts: the kubelet root (a self bind mount; secret and projected volumes are tmpfs), containerd's
# state and rootfs, pod network namespaces
for m in $(grep -oE " ($R|/run/ck8s|$C/containerd-root)[^ ]*" /proc/mounts | sort -r -u); do
  umount "$m" 2>/dev/null || umount -l "$m"
done
ip link del ck8s0 2>/dev/null && echo "down: deleted bridge ck8s0"
ip link del ck8s-node 2>/dev/null && echo "down: deleted interface ck8s-node"
for s in /sys/fs/cgroup/*/; do [ -d "${s}kubepods" ] && find "${s}kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null; done
rm -rf "$R" /run/ck8s
# containerd 1.6 shims put their sockets in the hard-coded /run/containerd/s: drop it if left empty
rmdir /run/containerd/s /run/containerd 2>/dev/null
if [ "${1:-}" = "--purge" ]; then rm -rf "$C/pki" "$C/containerd-root" "$C/etc" "$C/volumes" "$C/images.env"; fi

# Verify: nothing of the cluster may be left on the machine.
left=()
for pid in $(pgrep -f -- "--address $SOCK|-address $SOCK|$C/(run|etc|pki)/" || true); do left+=("process $pid: $(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | cut -c1-120)"); done
grep -qE " ($R|/run/ck8s|$C/containerd-root)" /proc/mounts && left+=("mounts: $(grep -oE " ($R|/run/ck8s|$C/containerd-root)[^ ]*" /proc/mounts | tr '\n' ' ')")
for l in ck8s0 ck8s-node; do ip link show "$l" >/dev/null 2>&1 && left+=("link $l"); done
for t in nat filter mangle; do
  ch=$(iptables -t $t -S 2>/dev/null | awk '/^-N KUBE-/ {print $2}' | tr '\n' ' ')
  [ -n "$ch" ] && left+=("iptables $t chains: $ch")
done
iptables -t nat -S POSTROUTING 2>/dev/null | grep -qE -- '-s 10\.244\.0\.' && left+=("iptables nat POSTROUTING rules for 10.244.0.0/24")
if [ ${#left[@]} -gt 0 ]; then
  printf 'down: left behind: %s\n' "${left[@]}" >&2
  exit 1
fi
echo "down: done, nothing left"
