#!/usr/bin/env bash
# Generates the test cluster's PKI and kubeconfigs under $CLUSTER_DIR/pki (kept across up/down;
# regenerated when the node address or name changes). Called by up.sh.
set -euo pipefail
C=${CLUSTER_DIR:?set CLUSTER_DIR}
P=$C/pki
NODE_IP=${NODE_IP:-10.250.0.1}   # up.sh puts it on its own interface
NODE_NAME=${NODE_NAME:-$(hostname)}
APISERVER_PORT=${APISERVER_PORT:-16443}
[ -f $P/.done ] && [ "$(cat $P/.done)" = "$NODE_IP $NODE_NAME" ] && exit 0
rm -rf $P; mkdir -p $P; cd $P
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=cluster-ca" 2>/dev/null
# cert NAME CN O [SAN]
cert() {
  local name=$1 cn=$2 o=$3 san=${4:-}
  local subj="/CN=$cn"; [ -n "$o" ] && subj="/O=$o/CN=$cn"
  openssl req -newkey rsa:2048 -nodes -keyout $name.key -out $name.csr -subj "$subj" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"; else echo "extendedKeyUsage=clientAuth"; fi
  } > $name.ext
  openssl x509 -req -in $name.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $name.crt -days 3650 -extfile $name.ext 2>/dev/null
  rm -f $name.csr $name.ext
}
cert apiserver kube-apiserver "" "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE_NAME,IP:10.96.0.1,IP:127.0.0.1,IP:$NODE_IP"
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert kubelet-server "$NODE_NAME" "" "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP"
cert admin kubernetes-admin system:masters
cert controller-manager system:kube-controller-manager ""
cert scheduler system:kube-scheduler ""
cert kubelet "system:node:$NODE_NAME" system:nodes
cert kube-proxy system:kube-proxy ""
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
for u in admin controller-manager scheduler kubelet kube-proxy; do
cat > $u.kubeconfig <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    certificate-authority: $P/ca.crt
    server: https://$NODE_IP:$APISERVER_PORT
users:
- name: $u
  user:
    client-certificate: $P/$u.crt
    client-key: $P/$u.key
contexts:
- name: local
  context: {cluster: local, user: $u}
current-context: local
KC
done
echo "$NODE_IP $NODE_NAME" > .done
