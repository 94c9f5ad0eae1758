#!/usr/bin/env bash
# Installs what a local node and the image builds need and this machine
# does not have yet, from Debian packages (pinned to the release series the
# node scripts were written against) plus the Rust standard library for the
# musl target (the Dockerfile builds static musl binaries). Idempotent: a
# second run installs nothing. Needs root (apt-get) on Debian 12.
#
#   bash hack/node/install.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The lock hack/tools/ensure.sh takes around apt-get too.
cache_root="${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-provider-proxmox/tools}"
log_tag=node
# shellcheck source=../lib.sh source-path=SCRIPTDIR
source "$here/../lib.sh"

# package=version-pattern (apt's glob): the series each was tried with.
packages=(
  "containerd=1.6.*"                   # the node's container runtime (CRI)
  "runc=1.1.*"                         # crun refuses a hybrid cgroup layout
  "containernetworking-plugins=1.1.*"  # bridge, host-local, portmap, loopback
  "iptables=1.8.*"                     # kube-proxy's iptables mode
  "conntrack=1:1.4.*"                  # kube-proxy cleans up UDP flows with it
  "buildah=1.28.*"                     # builds the Dockerfile without a daemon
  "mmdebstrap=1.3.*"                   # the build's Debian base image
  "musl-tools=1.2.*"                   # a C compiler for the musl target (ring)
  "iproute2"                           # ip netns, veth
  "util-linux"                         # nsenter, setsid, flock
)

missing=()
for spec in "${packages[@]}"; do
  name="${spec%%=*}"
  status="$(dpkg-query -W -f '${Status}' "$name" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$spec")
done
if ((${#missing[@]})); then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    die "missing Debian packages: ${missing[*]%%=*}; run this script as root on Debian 12"
  fi
  lock apt
  export DEBIAN_FRONTEND=noninteractive
  log "installing ${missing[*]}"
  apt_log="$(mktemp)"
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$apt_log" 2>&1; then
    log "apt-get update, then trying again"
    apt-get update -qq >"$apt_log" 2>&1 || { cat "$apt_log" >&2; die "apt-get update failed"; }
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$apt_log" 2>&1 \
      || { cat "$apt_log" >&2; die "apt-get install ${missing[*]} failed"; }
  fi
  rm -f "$apt_log"
fi

# The Rust toolchain the build base image is made of: the host's own, plus
# the musl target's standard library.
command -v rustup >/dev/null || die "rustup is not on PATH (the build base copies its toolchain)"
target="$(uname -m)-unknown-linux-musl"
toolchain="$(cd "$here/../.." && rustup show active-toolchain | awk '{print $1}')"
if ! rustup target list --toolchain "$toolchain" --installed | grep -qx "$target"; then
  log "adding the $target target to $toolchain"
  rustup target add --toolchain "$toolchain" "$target" >&2
fi
log "node prerequisites installed"
