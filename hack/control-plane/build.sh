#!/usr/bin/env bash
# Builds etcd, kube-apiserver and a matching kubectl from the Go modules pinned
# next to this script (go.mod + go.sum, nothing vendored) and caches the
# binaries outside the repository, keyed by those files, this script and
# hack/lib.sh, so only the first run on a machine pays for the build (about 6 minutes on
# 2 cores with an empty Go cache; a few seconds afterwards).
#
# Progress goes to stderr. The last line on stdout is the directory holding
# `etcd`, `kube-apiserver` and `kubectl`.
#
# Environment:
#   CONTROL_PLANE_CACHE  cache root (default: $XDG_CACHE_HOME or ~/.cache,
#                        then crossplane-provider-proxmox/control-plane)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-provider-proxmox/control-plane}"
log_tag=control-plane
# shellcheck source=../lib.sh source-path=SCRIPTDIR
source "$here/../lib.sh"

k8s_version="$(required_version k8s.io/kubernetes "$here/kubernetes/go.mod")"
etcd_version="$(required_version go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")"
key="$(content_key "$here"/kubernetes/go.mod "$here"/kubernetes/go.sum \
           "$here"/etcd/go.mod "$here"/etcd/go.sum "$here"/build.sh "$here"/../lib.sh)"
out="$cache_root/k8s-$k8s_version-etcd-$etcd_version-$key"

complete() { [[ -x "$out/kube-apiserver" && -x "$out/kubectl" && -x "$out/etcd" ]]; }

if complete; then
  echo "$out"
  exit 0
fi

need_go "build the control plane"

# Two test binaries (or `make` and an editor) may ask at the same time: the
# second waits for the first instead of building the same thing twice.
lock control-plane
if complete; then
  echo "$out"
  exit 0
fi

tmp="$(mktemp -d "$cache_root/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# The toolchain on PATH, no cgo (no C compiler needed), go.mod/go.sum as committed.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
start=$SECONDS

# Runs a command in the background and reports every 30 s that it is still
# going, so a long first build does not look like a hang.
with_progress() {
  local what="$1"; shift
  "$@" &
  local pid=$! started=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break
    done
    kill -0 "$pid" 2>/dev/null && log "still building $what ($((SECONDS - started)) s so far)"
  done
  wait "$pid" || die "building $what failed (see the go output above)"
  log "$what built in $((SECONDS - started)) s"
}

log "building the control plane into $out"
log "first run on this machine: downloads Go modules (~830 MB) and compiles; about 6 min on 2 cores"

log "building etcd $etcd_version"
with_progress "etcd $etcd_version" \
  bash -c 'cd "$1/etcd" && go build -trimpath -ldflags "-s -w" -o "$2/etcd" go.etcd.io/etcd/server/v3' \
  _ "$here" "$tmp"

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
log "building kube-apiserver and kubectl $k8s_version"
# One `go build` for both commands shares the compilation of common packages.
with_progress "kube-apiserver and kubectl $k8s_version" \
  bash -c 'cd "$1/kubernetes" && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$3" -o "$2/" \
             k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl' \
  _ "$here" "$tmp" "$ldflags"

# A binary that does not report the pinned version is a broken build, not a
# cache entry. (Output captured first: `cmd | grep -q` under pipefail fails
# when grep exits early and cmd gets SIGPIPE.)
check_version() {
  local binary="$1" expected="$2" reported
  shift 2
  reported="$("$tmp/$binary" "$@" 2>&1)" || die "$binary $* failed: $reported"
  [[ "$reported" == *"$expected"* ]] || die "$binary reports '$reported', expected $expected"
}
check_version kube-apiserver "Kubernetes $k8s_version" --version
check_version kubectl "Client Version: $k8s_version" version --client
check_version etcd "etcd Version: ${etcd_version#v}" --version

rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "control plane ready in $((SECONDS - start)) s: $out"
echo "$out"
