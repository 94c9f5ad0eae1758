#!/usr/bin/env bash
# kubectl against the node of hack/node/up.sh (same NODE_DIR, NODE_NETNS),
# as the admin, from inside its network namespace:
#   bash hack/node/kubectl.sh get pods -A
#   bash hack/node/kubectl.sh -n crossplane-system logs deploy/crossplane-provider-proxmox
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=env.bash source-path=SCRIPTDIR
source "$here/env.bash"
[[ -e "/run/netns/$netns" && -f "$node_dir/cluster/kubeconfig" ]] \
  || die "no node runs in $node_dir: start one with hack/node/up.sh"
kubectl "$@"
