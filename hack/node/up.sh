#!/usr/bin/env bash
# Starts one real Kubernetes node next to testenv's control plane, all in a
# network namespace of its own with no link out, so nothing ever talks to
# an address outside this machine: the namespace holds loopback and a veth
# pair whose ends both stay inside it (the node's address, NODE_IP, on one
# end; the kubelet refuses a loopback node address).
#
# In the namespace: etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler (`testenv up --node-address`), containerd with runc, the
# kubelet (named by its address: the apiserver reaches it without DNS),
# kube-proxy (iptables mode: ClusterIP Services, `kubernetes` among them),
# the CNI bridge (pods get addresses in POD_SUBNET) and the cluster DNS
# (CoreDNS on the node's address: `<service>.<namespace>.svc` resolves). The images named by
# NODE_IMAGES (docker-archive files, hack/node/images.sh) are imported into
# containerd, so pods run them with no registry.
#
#   bash hack/node/up.sh            # prints the kubeconfig path last
#   bash hack/node/kubectl.sh get nodes
#   bash hack/node/down.sh          # stops everything, restores host settings
#
# Needs root, hack/node/install.sh's packages and a built workspace
# (target/debug/testenv). Environment (the same for down.sh):
#   NODE_DIR     state, logs, containerd's and the kubelet's roots (default .work/node)
#   NODE_NETNS   the network namespace's name (default crossplane-node)
#   NODE_IP      the node's address (default 10.99.0.1), POD_SUBNET (10.99.1.0/24)
#   NODE_IMAGES  space-separated docker-archive files to import
#   NODE_REGISTRY  a plain-HTTP registry on the namespace's loopback
#                (127.0.0.1:PORT) that containerd pulls from, for images
#                a pod names there (hack/crossplane/run.sh: the Deployments
#                Crossplane makes for its packages)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=env.bash source-path=SCRIPTDIR
source "$here/env.bash"
node_ip="${NODE_IP:-10.99.0.1}"
pod_subnet="${POD_SUBNET:-10.99.1.0/24}"

[[ "$(id -u)" == 0 ]] || die "a node needs root (network namespace, mounts, cgroups)"
for cmd in containerd runc ctr nsenter ip iptables; do
  command -v "$cmd" >/dev/null || die "$cmd is missing: run hack/node/install.sh"
done
[[ -x /usr/lib/cni/bridge ]] || die "the CNI plugins are missing: run hack/node/install.sh"
testenv="$repo/${CARGO_TARGET_DIR:-target}/debug/testenv"
[[ -x "$testenv" ]] || die "$testenv is missing: cargo build --workspace --all-targets"
if [[ -f "$node_dir/containerd.pid" ]] && kill -0 "$(cat "$node_dir/containerd.pid")" 2>/dev/null; then
  die "a node already runs in $node_dir: run hack/node/down.sh first"
fi
bin="$(bash "$here/build.sh" | tail -1)"
control_plane="$(bash "$repo/hack/control-plane/build.sh" | tail -1)"
pause_image="$(bash "$here/images.sh" pause | tail -1)"
start=$SECONDS
mkdir -p "$node_dir"/{containerd,cni,kubelet,pod-logs}
ln -sfn "$bin" "$node_dir/bin"
ln -sfn "$control_plane/kubectl" "$node_dir/kubectl"

if [[ ! -e "/run/netns/$netns" ]]; then
  ip netns add "$netns"
  ip -n "$netns" link set lo up
  ip -n "$netns" link add node0 type veth peer name node0-peer
  ip -n "$netns" addr add "$node_ip/24" dev node0
  ip -n "$netns" link set node0 up
  ip -n "$netns" link set node0-peer up
  # A default route into the dead end: the kubelet and kube-proxy want one.
  ip -n "$netns" route add default dev node0
fi

# Host-wide settings the kubelet changes (the rest it touches belong to
# the namespace); down.sh puts them back.
if [[ ! -f "$node_dir/sysctl.orig" ]]; then
  for key in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
      kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
    echo "$key=$(sysctl -n "$key")"
  done >"$node_dir/sysctl.orig"
fi

log "control plane (testenv, with kube-controller-manager and kube-scheduler)"
kubeconfig="$(in_ns "$testenv" up --dir "$node_dir/cluster" --node-address "$node_ip" \
                --node-bin-dir "$bin" | tail -1)"
ca="$node_dir/cluster/pki/ca.crt"

cat >"$node_dir/containerd/config.toml" <<EOF
version = 2
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
[grpc]
  address = "$node_dir/containerd/containerd.sock"
[ttrpc]
  address = "$node_dir/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_ref"
  # Without CAP_SYS_RESOURCE a negative oom_score_adj (the sandbox's -998)
  # fails in runc: "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node_dir/cni"
EOF
if [[ -n "${NODE_REGISTRY:-}" ]]; then
  [[ "$NODE_REGISTRY" == 127.0.0.1:* ]] || die "NODE_REGISTRY must be 127.0.0.1:PORT, not $NODE_REGISTRY"
  cat >>"$node_dir/containerd/config.toml" <<EOF
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."$NODE_REGISTRY"]
    endpoint = ["http://$NODE_REGISTRY"]
EOF
fi
cat >"$node_dir/cni/10-node.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "node", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$node_dir/cni/ipam",
            "ranges": [[{"subnet": "$pod_subnet"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"}]}
EOF

log "containerd"
daemon containerd containerd --config "$node_dir/containerd/config.toml"
for _ in $(seq 100); do [[ -S "$node_dir/containerd/containerd.sock" ]] && break; sleep 0.1; done
[[ -S "$node_dir/containerd/containerd.sock" ]] || die "containerd did not start (see $node_dir/containerd.log)"
for archive in "$pause_image" ${NODE_IMAGES:-}; do
  ctr_k8s images import "$archive" >/dev/null || die "importing $archive into containerd failed"
done

log "cluster DNS (coredns)"
# Only cluster.local: the namespace has no upstream resolver to forward to.
cat >"$node_dir/Corefile" <<EOF
cluster.local:53 {
    errors
    kubernetes cluster.local {
        kubeconfig $kubeconfig
    }
}
EOF
daemon coredns "$bin/coredns" -conf "$node_dir/Corefile"
# Pods with dnsPolicy Default (and the node's own lookups) resolve nothing.
: >"$node_dir/kubelet/resolv.conf"
cat >"$node_dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 (hybrid) and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$node_dir/containerd/containerd.sock
# The apiserver presents its kubelet client certificate (testenv's CA);
# what it may do is asked of the apiserver (SubjectAccessReview).
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $ca}
authorization: {mode: Webhook}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
failSwapOn: false
resolvConf: $node_dir/kubelet/resolv.conf
clusterDNS: [$node_ip]
clusterDomain: cluster.local
# Images come from the archives above, never from a registry: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
podLogsDir: $node_dir/pod-logs
EOF

log "kubelet"
daemon kubelet "$bin/kubelet" --config="$node_dir/kubelet/config.yaml" --kubeconfig="$kubeconfig" \
  --root-dir="$node_dir/kubelet/root" --cert-dir="$node_dir/kubelet/pki" \
  --node-ip="$node_ip" --hostname-override="$node_ip"

log "kube-proxy"
# Conntrack limits are host-wide: left alone (zeros).
cat >"$node_dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $kubeconfig}
hostnameOverride: $node_ip
mode: iptables
clusterCIDR: $pod_subnet
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: [primary]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, udpTimeout: 0s, udpStreamTimeout: 0s}
EOF
daemon kube-proxy "$bin/kube-proxy" --config="$node_dir/kube-proxy.yaml"

for _ in $(seq 240); do
  kubectl get node "$node_ip" >/dev/null 2>&1 && break
  sleep 0.25
done
kubectl wait --for=condition=Ready "node/$node_ip" --timeout=120s >&2 \
  || die "node $node_ip is not Ready (see $node_dir/kubelet.log)"
# Pods need their namespace's ServiceAccount, which the controller manager makes.
for _ in $(seq 240); do
  kubectl -n default get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.25
done
log "node $node_ip Ready $((SECONDS - start)) s after start (logs in $node_dir)"
echo "$kubeconfig"
