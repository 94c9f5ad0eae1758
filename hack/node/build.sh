#!/usr/bin/env bash
# Builds what a local node runs beside testenv's control plane, at the
# Kubernetes version hack/control-plane builds kube-apiserver at:
# kubelet, kube-proxy, kube-controller-manager and kube-scheduler from the
# Go modules pinned in hack/node/kubernetes (hack/control-plane's go.mod with
# these four `tool` lines, then `go mod tidy`; no shared version differs),
# the cluster DNS (CoreDNS with only the plugins it needs, hack/node/coredns)
# and the sandbox process hack/node/pause/pause.c (gcc -static). Cached
# outside the repository, keyed by those files, this script and hack/lib.sh,
# like hack/control-plane/build.sh: about 4 minutes on 2 cores the first
# time (less with the Go module cache of the control-plane build), a few
# milliseconds afterwards.
#
# Progress goes to stderr. The last line on stdout is the directory holding
# the binaries.
#
# Environment:
#   NODE_CACHE  cache root (default: $XDG_CACHE_HOME or ~/.cache, then
#               crossplane-provider-proxmox/node)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-provider-proxmox/node}"
log_tag=node
# shellcheck source=../lib.sh source-path=SCRIPTDIR
source "$here/../lib.sh"

commands=(kubelet kube-proxy kube-controller-manager kube-scheduler)
k8s_version="$(required_version k8s.io/kubernetes "$here/kubernetes/go.mod")"
control_plane_version="$(required_version k8s.io/kubernetes "$here/../control-plane/kubernetes/go.mod")"
[[ "$k8s_version" == "$control_plane_version" ]] \
  || die "hack/node/kubernetes pins $k8s_version, hack/control-plane $control_plane_version: make them equal"
key="$(content_key "$here"/kubernetes/go.mod "$here"/kubernetes/go.sum "$here"/pause/pause.c \
           "$here"/coredns/go.mod "$here"/coredns/go.sum "$here"/coredns/main.go \
           "$here"/build.sh "$here"/../lib.sh)"
out="$cache_root/k8s-$k8s_version-$key"

complete() {
  local c
  for c in "${commands[@]}" coredns pause; do [[ -x "$out/$c" ]] || return 1; done
}

# Prints the cache entry if it is complete.
cached() { complete && echo "$out"; }

cached && exit 0
need_go "build the node's binaries"
command -v gcc >/dev/null || die "gcc is not on PATH; it builds the sandbox (pause) process"
# Concurrent callers wait for the first one's build.
lock node-build
cached && exit 0

tmp="$(mktemp -d "$cache_root/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
log "building ${commands[*]} $k8s_version and coredns into $out"
log "first run on this machine: about 4 min on 2 cores (Go modules shared with the control-plane build)"
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
packages=()
for c in "${commands[@]}"; do packages+=("k8s.io/kubernetes/cmd/$c"); done
# One `go build` for all four shares the compilation of common packages.
(cd "$here/kubernetes" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
   go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldflags" -o "$tmp/" "${packages[@]}") \
  || die "building ${commands[*]} failed (see the go output above)"
(cd "$here/coredns" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
   go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .) || die "building coredns failed"
gcc -static -O2 -Wall -Werror -o "$tmp/pause" "$here/pause/pause.c" || die "building pause failed"

for c in "${commands[@]}"; do
  reported="$("$tmp/$c" --version 2>&1)" || die "$c --version failed: $reported"
  [[ "$reported" == *"$k8s_version"* ]] || die "$c reports '$reported', expected $k8s_version"
done
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "node binaries ready in $((SECONDS - start)) s: $out"
echo "$out"
