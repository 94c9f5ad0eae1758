#!/usr/bin/env bash
# Builds the Crossplane package of the provider (an xpkg: an OCI image whose
# base layer holds package/crossplane.yaml and the CRDs, with the controller
# image embedded as its runtime layers).
#
#   docker build -t crossplane-provider-proxmox:latest .
#   scripts/build-xpkg.sh                    # -> .work/provider-proxmox.xpkg
#   crossplane xpkg push -f .work/provider-proxmox.xpkg <registry>/<org>/provider-proxmox:v0.1.0
#
# The CRDs are not kept in package/ (no second copy to drift): the package
# root is assembled in a temporary directory from package/crossplane.yaml and
# crds/*.yaml, then `crossplane xpkg build` runs on it.
#
# Options:
#   --image IMAGE         runtime image in the local Docker daemon
#                         (crossplane-provider-proxmox:latest)
#   --image-tarball FILE  the runtime image from a docker-archive or OCI
#                         tarball instead (no Docker daemon needed)
#   --output FILE         package file (.work/provider-proxmox.xpkg)
#   --assemble-only DIR   only write the package root into DIR (empty or new)
#                         and stop: no crossplane CLI, no Docker needed
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image=crossplane-provider-proxmox:latest
image_tarball=""
output="$root/.work/provider-proxmox.xpkg"
assemble_only=""

usage() {
  sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) image="${2:?--image needs a value}"; shift 2 ;;
    --image-tarball) image_tarball="${2:?--image-tarball needs a file}"; shift 2 ;;
    --output) output="${2:?--output needs a value}"; shift 2 ;;
    --assemble-only) assemble_only="${2:?--assemble-only needs a directory}"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "build-xpkg.sh: unknown argument $1" >&2; usage ;;
  esac
done

# assemble DIR: the package root, crossplane.yaml and one file per CRD.
assemble() {
  local dir="$1"
  mkdir -p "$dir"
  if [[ -n "$(ls -A "$dir")" ]]; then
    echo "build-xpkg.sh: $dir is not empty" >&2
    exit 1
  fi
  cp "$root/package/crossplane.yaml" "$dir/crossplane.yaml"
  mkdir -p "$dir/crds"
  cp "$root"/crds/*.yaml "$dir/crds/"
}

if [[ -n "$assemble_only" ]]; then
  assemble "$assemble_only"
  echo "$assemble_only"
  exit 0
fi

command -v crossplane >/dev/null || {
  echo "build-xpkg.sh: the crossplane CLI is needed (see docs/install.md, Crossplane package)" >&2
  exit 1
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
assemble "$work/package"
mkdir -p "$(dirname "$output")"
# --examples-root explicit: the CLI's default (./examples) depends on the
# directory it runs from; these are the examples docs/ and the deploy suite
# use, every one accepted by the API server.
runtime=(--embed-runtime-image="$image")
[[ -z "$image_tarball" ]] || runtime=(--embed-runtime-image-tarball="$image_tarball")
crossplane xpkg build \
  --package-root="$work/package" \
  --examples-root="$root/examples" \
  "${runtime[@]}" \
  --package-file="$output"
echo "$output"
