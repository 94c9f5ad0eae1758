#!/usr/bin/env bash
# Builds what `make crossplane-e2e` (hack/crossplane/run.sh) runs, from
# source with `go`, at pinned versions that the Go module proxy serves and
# go.sum verifies, cached outside the repository:
#
#   bash hack/crossplane/build.sh all     # core, CLI, registry, function
#   bash hack/crossplane/build.sh tools   # registry and function only (for
#                                         # release binaries of core and CLI)
#
# The last line on stdout is the directory holding:
#   crossplane            Crossplane core (`core init`, `core start`, `rbac start`)
#   crossplane-cli        its CLI (cmd/crank: `xpkg build/push`, `beta trace`)
#   crds/                 core's CRDs (`core init` applies them)
#   registry              go-containerregistry's in-memory OCI registry
#   function-compose-vms  the composition function of hack/crossplane/function
#
# Core and CLI come from the module github.com/crossplane/crossplane/v2 at
# CROSSPLANE_VERSION (default v2.1.0; a release that still has cmd/crank).
# `go install module/cmd@version` cannot be used: it asks the proxy for the
# module's version list (deprecation check), which the proxy refuses for
# this module. So the exact version is downloaded (`go mod download`,
# checked against the checksum database) and built inside that directory
# with its own go.mod and go.sum. The version is stamped at link time as a
# release build does: core checks every package's `spec.crossplane.version`
# against it, and an unstamped build ("") satisfies no constraint.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_tag=crossplane
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-provider-proxmox"
# shellcheck source=../lib.sh source-path=SCRIPTDIR
source "$here/../lib.sh"

mode="${1:-}"
[[ "$mode" == all || "$mode" == tools ]] || { sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
version="${CROSSPLANE_VERSION:-v2.1.0}"
module=github.com/crossplane/crossplane/v2
# go-containerregistry at the version Crossplane v2.1.0 requires.
registry_version=v0.20.6
need_go "build Crossplane $version, its registry and the composition function"

# module_dir MODULE@VERSION: where `go mod download` put it.
module_dir() {
  local dir
  dir="$(go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir" ]] || die "go mod download $1 failed"
  echo "$dir"
}

# build_in MODULE@VERSION OUT PKG...: `go build` inside the module.
build_in() {
  local src="$1" out="$2"; shift 2
  local dir ldflags="-s -w"
  dir="$(module_dir "$src")"
  [[ "$src" == "$module@"* ]] && ldflags+=" -X $module/internal/version.version=$version"
  (cd "$dir" && GOFLAGS=-mod=readonly CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$ldflags" \
     -o "$out/" "$@") || die "building $* of $src failed"
}

key="$(content_key <(echo "$version $registry_version"; declare -f module_dir build_in) "$here/../lib.sh")"
out="$cache_root/crossplane-$version-$key"
fn_key="$(cd "$here/function" && content_key go.mod go.sum ./*.go)"
lock crossplane-build
mkdir -p "$out"

if [[ "$mode" == all && ! -x "$out/crossplane-cli" ]]; then
  start=$SECONDS
  log "building Crossplane core and CLI $version from source (minutes the first time)"
  build_in "$module@$version" "$out" ./cmd/crossplane ./cmd/crank
  rm -rf "$out/crds" && cp -r "$(module_dir "$module@$version")/cluster/crds" "$out/crds"
  chmod -R u+w "$out/crds"
  mv "$out/crank" "$out/crossplane-cli"
  log "Crossplane $version built in $((SECONDS - start)) s"
fi
if [[ ! -x "$out/registry" ]]; then
  log "building the OCI registry (go-containerregistry $registry_version)"
  build_in "github.com/google/go-containerregistry@$registry_version" "$out" ./cmd/registry
fi
if [[ ! -x "$out/function-compose-vms-$fn_key" ]]; then
  start=$SECONDS
  log "building the composition function (hack/crossplane/function)"
  (cd "$here/function" && GOFLAGS=-mod=readonly CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" \
      -o "$out/function-compose-vms-$fn_key" .) || die "building hack/crossplane/function failed"
  ln -sfn "function-compose-vms-$fn_key" "$out/function-compose-vms"
  log "function built in $((SECONDS - start)) s"
fi
echo "$out"
