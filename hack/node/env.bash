# What hack/node/up.sh, down.sh, kubectl.sh and images.sh share: where the
# node lives and how to reach into its network namespace. Sourced, not run;
# the caller sets `here` (this directory) first.
# shellcheck shell=bash disable=SC2034 # the variables are the callers'

repo="$(cd "${here:?}/../.." && pwd)"
log_tag=node
cache_root="${NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-provider-proxmox/node}"
# shellcheck source=../lib.sh source-path=SCRIPTDIR
source "$here/../lib.sh"

node_dir="$(realpath -m "${NODE_DIR:-$repo/.work/node}")"
netns="${NODE_NETNS:-crossplane-node}"
# The sandbox image (hack/node/images.sh pause), as containerd names it.
pause_ref=localhost/pause:local

# Runs a command in the node's network namespace. Not `ip netns exec`,
# which remounts /sys and hides the cgroup mounts the kubelet needs.
in_ns() { nsenter --net="/run/netns/$netns" "$@"; }

# kubectl of the control plane's version, as the admin, in the namespace.
kubectl() {
  in_ns "$node_dir/kubectl" --kubeconfig "$node_dir/cluster/kubeconfig" "$@"
}

ctr_k8s() { ctr --address "$node_dir/containerd/containerd.sock" --namespace k8s.io "$@"; }

# daemon NAME COMMAND...: starts COMMAND in the namespace in a session of
# its own, logging to NAME.log, and records its PID in NAME.pid.
daemon() {
  local name="$1"; shift
  # Not through in_ns: a function would run in a forked shell. nsenter
  # execs setsid, which execs the command (not being a group leader): the
  # background job's PID is the daemon's.
  nsenter --net="/run/netns/$netns" setsid "$@" >"$node_dir/$name.log" 2>&1 </dev/null &
  echo "$!" >"$node_dir/$name.pid"
  sleep 0.2
  kill -0 "$!" 2>/dev/null || die "$name exited at once (see $node_dir/$name.log)"
}
