#!/usr/bin/env bash
# Starts the single-node test cluster (containerd + runc from Debian, bridge CNI, kube-proxy in
# iptables mode, CoreDNS) from the binaries hack/cluster/build.sh caches under bin/cluster/.
# Its state lives in $CLUSTER_DIR (default .cluster/, ignored by git): pki/ (kept), containerd's
# image store (kept), run/ (PIDs, logs, etcd, kubelet; removed by down.sh). Needs root and the
# Debian packages hack/cluster/deps.sh installs. Stop it with hack/cluster/down.sh.
#
# Every address the cluster uses is one it creates: the node address lives on the interface
# ck8s-node made here (an empty bridge), pods on the bridge ck8s0, services as iptables rules;
# CoreDNS answers cluster names only and forwards nothing.
#
# If the cluster is already up and its API server ready, up.sh only prints the kubeconfig.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export CLUSTER_DIR=${CLUSTER_DIR:-$root/.cluster}
C=$CLUSTER_DIR
B=$("$root/hack/cluster/build.sh" | tail -1)
R=$C/run
P=$C/pki
E=$C/etc
L=$R/log
export NODE_IP=${NODE_IP:-10.250.0.1}
export NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
export APISERVER_PORT=16443
ETCD_PORT=12379
SOCK=/run/ck8s/containerd.sock
CTR="ctr --address $SOCK"
K="$B/kubectl --kubeconfig=$P/admin.kubeconfig"
T0=$(date +%s.%N)
ts() { awk -v a="$(date +%s.%N)" -v b="$T0" -v m="$*" 'BEGIN{printf "up: %6.1fs %s\n", a-b, m}' >&2; }

[ "$(id -u)" = 0 ] || { echo "up: must run as root (containerd, kubelet, iptables, mounts)" >&2; exit 1; }
for cmd in containerd ctr runc iptables; do
  command -v $cmd >/dev/null || { echo "up: $cmd is missing: run make cluster-deps (hack/cluster/deps.sh)" >&2; exit 1; }
done
[ -x /usr/lib/cni/bridge ] || { echo "up: /usr/lib/cni/bridge is missing: run make cluster-deps (hack/cluster/deps.sh)" >&2; exit 1; }

if ls $R/pids/*.pid >/dev/null 2>&1; then
  if [ -f $P/ca.crt ] && curl -sf --max-time 2 --cacert $P/ca.crt https://$NODE_IP:$APISERVER_PORT/readyz >/dev/null 2>&1; then
    ts "already up"; echo "$P/admin.kubeconfig"; exit 0
  fi
  echo "up: $R/pids holds PIDs but the API server is not ready: run hack/cluster/down.sh first" >&2; exit 1
fi
mkdir -p $R/pids $L /run/ck8s $E/cni/net.d $C/containerd-root
# configuration: the templates with this cluster's directory filled in
for f in containerd.toml kubelet-config.yaml kube-proxy-config.yaml coredns.yaml; do
  sed "s#@CLUSTER_DIR@#$C#g" "$root/hack/cluster/etc/$f" > $E/$f
done
sed "s#@CLUSTER_DIR@#$C#g" "$root/hack/cluster/etc/cni/10-ck8s-bridge.conflist" > $E/cni/net.d/10-ck8s-bridge.conflist

if ! ip -4 addr show dev ck8s-node 2>/dev/null | grep -q "inet $NODE_IP/"; then
  ip link add ck8s-node type bridge 2>/dev/null || true   # an empty bridge: not every kernel has dummy links
  ip addr add $NODE_IP/32 dev ck8s-node
  ip link set ck8s-node up
fi
"$root/hack/cluster/pki.sh"

# kernel settings kube-proxy and the bridge CNI need
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || { modprobe br_netfilter 2>/dev/null && sysctl -qw net.bridge.bridge-nf-call-iptables=1; } || true

start() { # name cmd...
  local n=$1; shift
  nohup "$@" > $L/$n.log 2>&1 &
  echo $! > $R/pids/$n.pid
  ts "started $n (pid $!)"
}
wait_for() { # description timeout-seconds cmd...
  local d=$1 t=$2; shift 2
  local end=$(( $(date +%s) + t ))
  while [ "$(date +%s)" -lt $end ]; do
    if "$@" >/dev/null 2>&1; then ts "$d ready"; return 0; fi
    sleep 0.2
  done
  echo "up: timeout after ${t}s waiting for $d (logs in $L)" >&2; return 1
}

start containerd containerd --config $E/containerd.toml
wait_for containerd 30 $CTR version
# images persist in containerd's root across up/down; re-imported when the archive changes
for img in $B/images/*.tar; do
  stamp=$C/containerd-root/.imported-$(basename "$img")
  if [ ! -f "$stamp" ] || [ "$img" -nt "$stamp" ]; then
    $CTR -n k8s.io images import "$img" >/dev/null && touch "$stamp"
    ts "imported $(cat "${img%.tar}.ref")"
  fi
done

start etcd $B/etcd --name ck8s --data-dir $R/etcd \
  --listen-client-urls http://127.0.0.1:$ETCD_PORT --advertise-client-urls http://127.0.0.1:$ETCD_PORT \
  --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
  --initial-cluster ck8s=http://127.0.0.1:12380 --unsafe-no-fsync=true
wait_for etcd 30 curl -sf http://127.0.0.1:$ETCD_PORT/health

# The API server listens on the node address only: the kubeconfigs and the kubernetes Service name it.
# It reaches the kubelet at the node address too: the hostname may resolve to a loopback address,
# which the node proxy (kubectl get --raw .../proxy/stats/summary) refuses.
start kube-apiserver $B/kube-apiserver \
  --etcd-servers=http://127.0.0.1:$ETCD_PORT \
  --bind-address=$NODE_IP --secure-port=$APISERVER_PORT --advertise-address=$NODE_IP \
  --service-cluster-ip-range=10.96.0.0/16 \
  --tls-cert-file=$P/apiserver.crt --tls-private-key-file=$P/apiserver.key \
  --client-ca-file=$P/ca.crt \
  --kubelet-client-certificate=$P/apiserver-kubelet-client.crt --kubelet-client-key=$P/apiserver-kubelet-client.key \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file=$P/sa.pub --service-account-signing-key-file=$P/sa.key \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true --profiling=false
wait_for kube-apiserver 90 curl -sf --cacert $P/ca.crt https://$NODE_IP:$APISERVER_PORT/readyz

start kube-controller-manager $B/kube-controller-manager \
  --kubeconfig=$P/controller-manager.kubeconfig \
  --authentication-kubeconfig=$P/controller-manager.kubeconfig --authorization-kubeconfig=$P/controller-manager.kubeconfig \
  --service-account-private-key-file=$P/sa.key --root-ca-file=$P/ca.crt \
  --cluster-signing-cert-file=$P/ca.crt --cluster-signing-key-file=$P/ca.key \
  --use-service-account-credentials=true --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=10257 --profiling=false
start kube-scheduler $B/kube-scheduler \
  --kubeconfig=$P/scheduler.kubeconfig \
  --authentication-kubeconfig=$P/scheduler.kubeconfig --authorization-kubeconfig=$P/scheduler.kubeconfig \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259 --profiling=false

mkdir -p $R/kubelet $R/pod-logs
start kubelet $B/kubelet --config=$E/kubelet-config.yaml --kubeconfig=$P/kubelet.kubeconfig \
  --root-dir=$R/kubelet --hostname-override=$NODE_NAME --node-ip=$NODE_IP --v=1
start kube-proxy $B/kube-proxy --config=$E/kube-proxy-config.yaml --hostname-override=$NODE_NAME

wait_for "node $NODE_NAME Ready" 180 bash -c "$K get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
wait_for "default ServiceAccount" 60 $K get serviceaccount default -n default
$K apply -f $E/coredns.yaml >/dev/null
wait_for CoreDNS 120 $K -n kube-system wait --for=condition=Available deploy/coredns --timeout=1s
ts "cluster up"
echo "$P/admin.kubeconfig"
