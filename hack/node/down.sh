#!/usr/bin/env bash
# Undoes hack/node/up.sh (same NODE_DIR and NODE_NETNS): deletes the
# workloads so the kubelet tears their sandboxes down (CNI DEL, mounts),
# stops the daemons by their recorded PIDs, then the control plane
# (`testenv down`), unmounts what is left under NODE_DIR, deletes the pod
# and node network namespaces and the kubelet's cgroups, and restores the
# host sysctls the kubelet changed. Safe to run twice, or after a failed start.
#
#   bash hack/node/down.sh          # KEEP_NODE_DIR=1 keeps the logs
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=env.bash source-path=SCRIPTDIR
source "$here/env.bash"

# stop NAME: SIGTERM to the recorded PID, SIGKILL after 10 s.
stop() {
  local file="$node_dir/$1.pid" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" || true; fi
  fi
  rm -f "$file"
}

start=$SECONDS
if [[ -e "/run/netns/$netns" && -f "$node_dir/kubelet.pid" ]] \
    && kill -0 "$(cat "$node_dir/kubelet.pid")" 2>/dev/null; then
  kubectl delete proxmoxvms --all -A --wait=false >/dev/null 2>&1 || true
  kubectl delete deployments,replicasets,daemonsets,statefulsets,jobs --all -A >/dev/null 2>&1 || true
  kubectl delete pods --all -A --grace-period=1 --timeout=60s >/dev/null 2>&1 || true
  for _ in $(seq 60); do
    [[ -z "$(ctr_k8s tasks ls -q 2>/dev/null || true)" ]] && break
    sleep 0.5
  done
  sleep 1 # the kubelet removes the sandboxes after their containers
fi
stop kube-proxy
stop coredns
stop kubelet
if [[ -S "$node_dir/containerd/containerd.sock" ]]; then
  for task in $(ctr_k8s tasks ls -q 2>/dev/null || true); do
    ctr_k8s tasks kill -s SIGKILL "$task" || true
  done
fi
stop containerd
if [[ -d "$node_dir/cluster" ]]; then
  testenv="$repo/${CARGO_TARGET_DIR:-target}/debug/testenv"
  if [[ -x "$testenv" ]]; then
    "$testenv" down --dir "$node_dir/cluster" >&2 || log "testenv down failed"
  else
    log "$testenv is missing: cannot stop the control plane in $node_dir/cluster"
  fi
fi

# Mounts left under NODE_DIR (rootfs, shm, volumes), deepest first.
awk -v dir="$node_dir/" 'index($2, dir) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" || true
done
# The pods' network namespaces (containerd names them cni-<uuid>).
for ns in $(ip netns list | awk '$1 ~ /^cni-/ {print $1}'); do ip netns del "$ns" || true; done
if [[ -e "/run/netns/$netns" ]]; then ip netns del "$netns" || true; fi
# The kubelet's cgroups (cgroupfs driver), once their processes are gone.
find /sys/fs/cgroup/*/kubepods -depth -type d -exec rmdir {} + 2>/dev/null || true
# The kubelet links container logs into /var/log/containers whatever its config says.
find /var/log/containers -maxdepth 1 -lname "$node_dir/*" -delete 2>/dev/null || true
rmdir /var/log/containers 2>/dev/null || true
if [[ -f "$node_dir/sysctl.orig" ]]; then
  while IFS="=" read -r key value; do sysctl -q -w "$key=$value" || log "cannot restore $key"; done \
    <"$node_dir/sysctl.orig"
  rm -f "$node_dir/sysctl.orig"
fi
if [[ "${KEEP_NODE_DIR:-}" == 1 ]]; then
  log "stopped in $((SECONDS - start)) s; logs kept in $node_dir"
else
  rm -rf "$node_dir"
  log "stopped in $((SECONDS - start)) s"
fi
