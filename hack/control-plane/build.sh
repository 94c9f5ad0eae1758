#!/usr/bin/env bash
# Builds etcd and kube-apiserver from the Go modules pinned next to this script
# and caches the binaries outside the repository, keyed by the modules' go.sum,
# so only the first run on a machine pays for the build (minutes on 2 cores).
#
# Prints the directory that holds `etcd` and `kube-apiserver` as its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-provider-proxmox/control-plane}"

key="$(cat "$here"/kube-apiserver/go.mod "$here"/kube-apiserver/go.sum \
           "$here"/etcd/go.mod "$here"/etcd/go.sum "$here"/build.sh | sha256sum | cut -c1-16)"
k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$here/kube-apiserver/go.mod")"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }' "$here/etcd/go.mod")"
out="$cache_root/k8s-$k8s_version-etcd-$etcd_version-$key"

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache_root"
tmp="$(mktemp -d "$cache_root/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

log() { printf '[control-plane] %s\n' "$*" >&2; }
start=$SECONDS

log "building etcd $etcd_version (first run only; about 1-2 min)"
( cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3 )
log "etcd built in $((SECONDS - start)) s"

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
log "building kube-apiserver $k8s_version (first run only; about 10-20 min on 2 cores)"
( cd "$here/kube-apiserver" && go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver ) &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 30
  kill -0 "$pid" 2>/dev/null && log "still building kube-apiserver ($((SECONDS - start)) s so far)"
done
wait "$pid"
log "kube-apiserver built; total $((SECONDS - start)) s"

rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
